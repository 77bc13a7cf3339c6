package gittest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// LockMounts holds, until the returned function is called, the lock that
// the repository's tests take to change the mount table (a mount, an
// unmount) and to run a round that must see it still (see [Still]), in
// every test process of the machine: go test runs packages at once, and
// a FUSE mount made by one package's test makes every inotify
// subscription of another's watch path read again. A round that holds it
// is not run again for the mounts of the tests, only for those of other
// programs. It must not be taken again before it is released. A lock that
// cannot be taken fails the test, which goes on unlocked; it may be called
// from any goroutine.
func LockMounts(tb testing.TB) (unlock func()) {
	tb.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "runtimeguard-tests-mounts.lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		tb.Errorf("the tests' mount lock: %v", err)
		return func() {}
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		tb.Errorf("the tests' mount lock: %v", err)
		return func() {}
	}
	return func() { f.Close() } // closing its only descriptor releases it
}
