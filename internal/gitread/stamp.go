package gitread

import "github.com/runtimeguard/runtimeguard/internal/fsread"

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
