//go:build windows

package updater

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// openLockProbe opens the lock file for a probe, sharing it with every
// other opener, for deletes and renames too.
func openLockProbe(path string) (*os.File, error) {
	return fsread.OpenShared(path)
}

// lockRange locks n bytes of f at off exclusively, without waiting;
// locked false when another handle holds any of them.
func lockRange(f *os.File, off, n uint32) (locked bool, err error) {
	ov := windows.Overlapped{Offset: off}
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, n, 0, &ov)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return false, nil
	}
	return err == nil, err
}

func unlockRange(f *os.File, off, n uint32) {
	ov := windows.Overlapped{Offset: off}
	_ = windows.UnlockFileEx(windows.Handle(f.Fd()), 0, n, 0, &ov)
}

// tryCheckoutLock takes the updater's byte at CheckoutLockOffset without
// waiting, and checks that no lease byte after it is held (a child that
// joined a lock whose owner died keeps its lease); held reports that
// another handle holds either. On success the lock byte stays taken.
func tryCheckoutLock(f *os.File) (held bool, err error) {
	ok, err := lockRange(f, CheckoutLockOffset, 1)
	if err != nil || !ok {
		return !ok && err == nil, err
	}
	free, err := lockRange(f, CheckoutLockOffset+1, CheckoutLeaseBytes)
	if err != nil || !free {
		unlockRange(f, CheckoutLockOffset, 1)
		return !free && err == nil, err
	}
	unlockRange(f, CheckoutLockOffset+1, CheckoutLeaseBytes)
	return false, nil
}

// unlockCheckout drops the lock byte a try took.
func unlockCheckout(f *os.File) { unlockRange(f, CheckoutLockOffset, 1) }
