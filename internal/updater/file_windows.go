//go:build windows

package updater

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// SafeOpen opens path itself, never what a reparse point (a symbolic link
// or junction) names, requires a regular disk file and reads at most
// limit+1 bytes. Opening a file on Windows never blocks on a writer.
func SafeOpen(path string, limit int64) ([]byte, FileKind, string) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, FileUnusable, "not a path: " + err.Error()
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
			// A link whose target is gone may fail to open as not found:
			// the path is absent only if nothing, not even a link, is there.
			if _, lerr := os.Lstat(path); lerr != nil && errors.Is(lerr, fs.ErrNotExist) {
				return nil, FileAbsent, ""
			}
		}
		if fi, lerr := os.Lstat(path); lerr == nil && fi.IsDir() {
			return nil, FileUnusable, "a directory" // which CreateFile refuses to open
		}
		return nil, FileUnusable, "open: " + err.Error()
	}
	defer windows.CloseHandle(h)
	if t, err := windows.GetFileType(h); err != nil || t != windows.FILE_TYPE_DISK {
		return nil, FileUnusable, "not a disk file (a pipe or a device)"
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return nil, FileUnusable, "GetFileInformationByHandle: " + err.Error()
	}
	switch {
	case info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0:
		return nil, FileUnusable, "a reparse point (a symbolic link or junction)"
	case info.FileAttributes&windows.FILE_ATTRIBUTE_DIRECTORY != 0:
		return nil, FileUnusable, "a directory"
	case info.FileAttributes&windows.FILE_ATTRIBUTE_DEVICE != 0:
		return nil, FileUnusable, "a device"
	}
	size := int64(info.FileSizeHigh)<<32 | int64(info.FileSizeLow)
	if size > limit {
		return nil, FileUnusable, fmt.Sprintf("over %d bytes", limit)
	}
	buf := make([]byte, size+1)
	n := 0
	for n < len(buf) {
		var m uint32
		if err := windows.ReadFile(h, buf[n:], &m, nil); err != nil {
			return nil, FileUnusable, "read: " + err.Error()
		}
		if m == 0 {
			break
		}
		n += int(m)
	}
	if int64(n) != size {
		return nil, FileUnusable, "changed size while it was read"
	}
	return buf[:n], FileRead, ""
}
