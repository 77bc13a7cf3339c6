// Package updater holds the files of the protocol between an updater and a
// guarded server: the formats of the in-progress marker and of the receipt
// the updater writes after each run, the reads of the recovery markers and
// the receipts, the lock file the updater holds while it runs, and the
// writer side (claiming and releasing the marker, writing receipts); and
// what a marker means (absent, active, stale or unknown, and what can be
// told of its process: Env.ClassifyMarker), which a claim obeys (Judge).
package updater

import (
	"errors"
	"io/fs"
	"os"
)

// ErrLocked is a lock that another holder has in a conflicting mode.
var ErrLocked = errors.New("the lock is held by another updater or a reload")

// Lock opens the lock file at path (creating it if missing) and takes an
// advisory lock on it without waiting: shared for a reload plan, which
// needs only read access (a lock file it may read but not write still
// takes it), exclusive for an updater, which opens it for writing too
// where it may (but on AIX, for reading alone otherwise). It never opens
// or creates through a link at the path, and refuses anything but a
// regular file there. A lock another process holds in a conflicting mode
// is ErrLocked. Closing the file releases the lock; so does the process's
// exit, whatever its cause.
func Lock(path string, exclusive bool) (*os.File, error) {
	f, err := openLock(path, true, exclusive, false)
	if exclusive && denied(err) && !exclusiveWrites {
		f, err = openLock(path, false, false, false)
	}
	if err != nil {
		return nil, err
	}
	if err := lockFile(f, exclusive); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "lock", Path: path, Err: err}
	}
	return f, nil
}
