//go:build windows

package runtimeguard

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// maxPID is the largest process ID OpenProcess takes (a DWORD).
const maxPID = math.MaxUint32

// safeOpenMarker opens the marker itself, never what a reparse point (a
// symbolic link or junction) names, requires a regular disk file and reads
// at most MaxMarkerBytes+1 bytes. Opening a file on Windows never blocks on
// a writer.
func safeOpenMarker(path string) ([]byte, fileKind) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, fileUnusable
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
			// A link whose target is gone may fail to open as not found:
			// the path is absent only if nothing, not even a link, is there.
			if _, lerr := os.Lstat(path); lerr != nil && errors.Is(lerr, fs.ErrNotExist) {
				return nil, fileAbsent
			}
		}
		return nil, fileUnusable
	}
	defer windows.CloseHandle(h)
	if t, err := windows.GetFileType(h); err != nil || t != windows.FILE_TYPE_DISK {
		return nil, fileUnusable
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return nil, fileUnusable
	}
	const notRegular = windows.FILE_ATTRIBUTE_DIRECTORY | windows.FILE_ATTRIBUTE_REPARSE_POINT | windows.FILE_ATTRIBUTE_DEVICE
	if info.FileAttributes&notRegular != 0 {
		return nil, fileUnusable
	}
	size := int64(info.FileSizeHigh)<<32 | int64(info.FileSizeLow)
	if size > MaxMarkerBytes {
		return nil, fileUnusable
	}
	buf := make([]byte, size+1)
	n := 0
	for n < len(buf) {
		var m uint32
		if err := windows.ReadFile(h, buf[n:], &m, nil); err != nil {
			return nil, fileUnusable
		}
		if m == 0 {
			break
		}
		n += int(m)
	}
	if int64(n) != size {
		return nil, fileUnusable
	}
	return buf[:n], fileRead
}

// probeProcess opens the process for a query; it never signals it. An
// invalid ID means no such process, a denied open means it exists, and an
// open process is alive until its handle is signalled. (The exit code is
// not consulted: a process may exit with 259, STILL_ACTIVE.)
func probeProcess(pid int) procInfo {
	if pid <= 0 || pid > maxPID {
		return procInfo{}
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		switch {
		case errors.Is(err, windows.ERROR_INVALID_PARAMETER):
			return procInfo{state: processGone}
		case errors.Is(err, windows.ERROR_ACCESS_DENIED):
			return procInfo{state: processAlive}
		}
		return procInfo{}
	}
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 0)
	if err != nil {
		return procInfo{}
	}
	switch ev {
	case uint32(windows.WAIT_TIMEOUT):
	case windows.WAIT_OBJECT_0:
		return procInfo{state: processGone}
	default:
		return procInfo{}
	}
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return procInfo{state: processAlive}
	}
	return procInfo{state: processAlive, start: time.Unix(0, created.Nanoseconds())}
}
