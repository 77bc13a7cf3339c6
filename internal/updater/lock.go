package updater

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/runtimeguard/runtimeguard/internal/durable"
)

// ErrLocked is a lock that another holder has in a conflicting mode.
var ErrLocked = errors.New("the lock is held by another updater or a reload")

// Lock opens the lock file at path (creating it if missing) and takes an
// advisory lock on it without waiting: shared for a reload plan, which
// needs only read access (a lock file it may read but not write still
// takes it), exclusive for an updater, which opens it for writing too
// where it may (but on AIX, for reading alone otherwise). The lock's
// directory is opened from home without following a link below it
// (durable.OpenIn: nothing is created where a link leads), and the file
// is never opened or created through a link at its name; anything but a
// regular file there is refused. A lock another process holds in a
// conflicting mode is ErrLocked. Closing the file releases the lock; so
// does the process's exit, whatever its cause.
func Lock(home, path string, exclusive bool) (*os.File, error) {
	d, err := durable.OpenIn(home, filepath.Dir(path), false)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return lockIn(d, filepath.Base(path), exclusive)
}

// lockIn is Lock of the entry name of d.
func lockIn(d *durable.Dir, name string, exclusive bool) (*os.File, error) {
	f, err := openLock(d, name, true, exclusive, false)
	if exclusive && denied(err) && !exclusiveWrites {
		f, err = openLock(d, name, false, false, false)
	}
	if err != nil {
		return nil, err
	}
	if err := lockFile(f, exclusive); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "lock", Path: f.Name(), Err: err}
	}
	return f, nil
}
