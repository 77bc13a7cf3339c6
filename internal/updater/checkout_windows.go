//go:build windows

package updater

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"

	"github.com/runtimeguard/runtimeguard/internal/durable"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// openLock opens the lock file at path, shared with every other opener
// (for deletes and renames too), and, unless follow, the name itself,
// never what a reparse point there (a symbolic link, a junction) names
// (FILE_FLAG_OPEN_REPARSE_POINT, as the marker is read): created where
// missing when create (never where a link leads), for reading and writing
// when write, for reading alone otherwise (LockFileEx takes either).
// Anything but a regular file, a reparse point included, is refused with
// an error matching fsread.ErrNotRegular.
func openLock(dir *durable.Dir, path string, create, write, follow bool) (*os.File, error) {
	path, err := dir.Checked(path) // the directories from the home checked again
	if err != nil {
		return nil, err
	}
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	access := uint32(windows.GENERIC_READ)
	if write {
		access |= windows.GENERIC_WRITE
	}
	disposition := uint32(windows.OPEN_EXISTING)
	if create {
		disposition = windows.OPEN_ALWAYS
	}
	flags := uint32(windows.FILE_ATTRIBUTE_NORMAL)
	if !follow {
		flags |= windows.FILE_FLAG_OPEN_REPARSE_POINT
	}
	h, err := windows.CreateFile(p, access, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, disposition, flags, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return regularOnly(os.NewFile(uintptr(h), path))
}

// isLink reports whether err is an open that found a link at the path:
// here the open itself succeeds, and its type refuses it.
func isLink(err error) bool {
	var te *fsread.TypeError
	return errors.As(err, &te) && te.Kind == "symbolic link"
}

// denied reports whether err is an open that the file's permissions
// refused.
func denied(err error) bool { return errors.Is(err, fs.ErrPermission) }

// exclusiveWrites is whether an exclusive lock needs the file open for
// writing: LockFileEx takes a handle open for reading.
const exclusiveWrites = false

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
