//go:build aix

package updater

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// lockFile takes a POSIX record lock on the whole of f without waiting:
// AIX has no flock(2) system call. Its flock emulation (libbsd) and
// Python's fcntl.flock where the C library has no flock take this same
// fcntl(2) lock, so an updater that locks that way and a server exclude
// each other. Unlike flock, a record lock belongs to the process, not to
// the open file: it does not exclude another lock of the same process, and
// closing any descriptor of the file in the process releases it.
func lockFile(f *os.File, exclusive bool) error {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: 0, Len: 0} // Len 0: to the end, however it grows
	if exclusive {
		lk.Type = unix.F_WRLCK
	}
	err := fsread.IgnoringEINTR(func() error { return unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk) })
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		return ErrLocked
	}
	return err
}
