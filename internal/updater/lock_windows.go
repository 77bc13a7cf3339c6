//go:build windows

package updater

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// Lock opens (creating it if missing) the lock file at path and takes a
// lock on its first byte with LockFileEx without waiting: shared for a
// reload plan, exclusive for an updater. A lock another process holds in a
// conflicting mode is ErrLocked. Closing the file releases the lock; so
// does the process's exit.
func Lock(path string, exclusive bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	ol := new(windows.Overlapped)
	if err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, ol); err != nil {
		f.Close()
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
			return nil, &fs.PathError{Op: "lock", Path: path, Err: ErrLocked}
		}
		return nil, &fs.PathError{Op: "lock", Path: path, Err: err}
	}
	return f, nil
}
