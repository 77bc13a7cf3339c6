package gitread

import (
	"io"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// Stamp is what a stat says of a file, as package fsread takes it: the
// reader's dependencies are stamps.
type Stamp = fsread.Stamp

// ErrChanged is the class of read failures of a file that changed while it
// was read: a later read may succeed.
var ErrChanged = fsread.ErrChanged

// StatStamp stats path, following links as the reads of Git's files do
// (see [fsread.StatStamp]).
func StatStamp(path string) (Stamp, error) { return fsread.StatStamp(path) }

// LstatStamp is StatStamp without following a final symbolic link.
func LstatStamp(path string) (Stamp, error) { return fsread.LstatStamp(path) }

// ReadRegular reads the regular file at path whole, following a final link
// unless nofollow (see [fsread.ReadRegular]).
func ReadRegular(path string, limit int64, nofollow bool) ([]byte, Stamp, error) {
	return fsread.ReadRegular(path, limit, nofollow)
}

// changedError is a read failure of the ErrChanged class.
type changedError = fsread.ChangedError

// OpenRegular opens the regular file at path for one read from its start
// to its end (see [fsread.OpenRegular]): nothing there, or a directory, is
// a nil ReadCloser, its Stamp saying which.
func OpenRegular(path string, limit int64, nofollow bool) (io.ReadCloser, Stamp, error) {
	f, st, err := fsread.OpenRegular(path, limit, nofollow)
	if f == nil {
		return nil, st, err
	}
	return f, st, nil
}
