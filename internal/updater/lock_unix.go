//go:build unix && !aix

package updater

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// lockFile takes flock(2) on f without waiting.
func lockFile(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	err := fsread.IgnoringEINTR(func() error { return unix.Flock(int(f.Fd()), how|unix.LOCK_NB) })
	if errors.Is(err, unix.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
