//go:build unix

package updater

import (
	"errors"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// openLockProbe opens the lock file for a probe without blocking (a FIFO
// planted at the path opens at once) and without becoming its terminal.
// AIX locks by fcntl(2), whose exclusive lock wants a writable file.
func openLockProbe(path string) (*os.File, error) {
	mode := unix.O_RDONLY
	if runtime.GOOS == "aix" {
		mode = unix.O_RDWR
	}
	var fd int
	err := fsread.IgnoringEINTR(func() (err error) {
		fd, err = unix.Open(path, mode|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		return err
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// tryCheckoutLock takes the lock on f exclusively without waiting; held
// reports that another open file holds it.
func tryCheckoutLock(f *os.File) (held bool, err error) {
	err = lockFile(f, true)
	if errors.Is(err, ErrLocked) {
		return true, nil
	}
	return false, err
}

// unlockCheckout drops a lock a try took: closing f does.
func unlockCheckout(*os.File) {}
