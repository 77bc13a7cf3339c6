// Package updater speaks the updater's side of the protocol between an
// updater and a guarded server: the receipt it writes after each run and
// the lock file it holds while it runs.
package updater

import "errors"

// ErrLocked is a lock that another holder has in a conflicting mode.
var ErrLocked = errors.New("the lock is held by another updater or a reload")
