package fsread

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

// SafeOpens says that a read asked not to follow a final link neither
// follows one nor blocks on a FIFO or device: here
// FILE_FLAG_OPEN_REPARSE_POINT, and only a disk file is read.
const SafeOpens = true

// finalMissing reports whether a not-exist error says only the last part
// of the path is missing: Windows tells ERROR_FILE_NOT_FOUND (the
// directory exists) from ERROR_PATH_NOT_FOUND (a part of the way does not
// exist, or is not a directory).
func finalMissing(err error) bool { return errors.Is(err, syscall.ERROR_FILE_NOT_FOUND) }

// OpenShared opens path for reading as os.Open does (a final link
// followed), and shares the file with every other opener for deleting it
// or renaming it away too (FILE_SHARE_DELETE), which os.Open does not: a
// writer that deletes the file is never refused while it is open here.
// (A rename of another file over it is still refused while it is open.)
func OpenShared(path string) (*os.File, error) {
	return openShared(path, windows.FILE_ATTRIBUTE_NORMAL)
}

// openNoFollow opens path itself, never what a reparse point there (a
// symbolic link or a junction) names: a link swapped in after the lstat is
// then the opened file's type, which the read refuses. It shares the file
// as OpenShared does.
func openNoFollow(path string) (*os.File, error) {
	return openShared(path, windows.FILE_FLAG_OPEN_REPARSE_POINT)
}

// openShared opens path for reading, shared with every other opener for
// reads, writes and deletes, with CreateFile's flags.
func openShared(path string, flags uint32) (*os.File, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, flags, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(h), path), nil
}

// openDir opens the directory dir for a listing, shared as OpenShared
// shares a file. Something else there is refused: Windows opens a file
// with the flag a directory needs.
func openDir(dir string) (*os.File, error) {
	f, err := openShared(dir, windows.FILE_FLAG_BACKUP_SEMANTICS)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		f.Close()
		if err == nil {
			err = &fs.PathError{Op: "open", Path: dir, Err: windows.ERROR_DIRECTORY}
		}
		return nil, err
	}
	return f, nil
}

// FileID names the file at path, whose lstat is st, by its volume serial
// number and file index, which a stat does not give: a file renamed over
// it is another, a write in place is not. It opens the file itself (a
// reparse point there is not followed) for its attributes only, shared
// for reads, writes and deletes; nothing at the path is "".
func FileID(path string, _ Stamp) (string, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return "", &fs.PathError{Op: "open", Path: path, Err: err}
	}
	h, err := windows.CreateFile(p, windows.FILE_READ_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return "", &fs.PathError{Op: "GetFileInformationByHandle", Path: path, Err: err}
	}
	return fmt.Sprintf("%d:%d", info.VolumeSerialNumber, uint64(info.FileIndexHigh)<<32|uint64(info.FileIndexLow)), nil
}
