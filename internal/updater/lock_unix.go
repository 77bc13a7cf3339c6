//go:build unix

package updater

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Lock opens (creating it if missing) the lock file at path and takes an
// advisory lock on it without waiting: shared for a reload plan, exclusive
// for an updater. A lock another process holds in a conflicting mode is
// ErrLocked. Closing the file releases the lock; so does the process's
// exit, whatever its cause.
func Lock(path string, exclusive bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	err = ignoringEINTR(func() error { return unix.Flock(int(f.Fd()), how|unix.LOCK_NB) })
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &fs.PathError{Op: "lock", Path: path, Err: ErrLocked}
		}
		return nil, &fs.PathError{Op: "lock", Path: path, Err: err}
	}
	return f, nil
}
