//go:build !unix && !windows

package updater

import (
	"errors"
	"io/fs"
	"os"

	"github.com/runtimeguard/runtimeguard/internal/durable"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// openLock opens the lock file at path: this platform has no open that
// refuses a link, so, unless follow, a link found at the name (before the
// open) is refused.
func openLock(dir *durable.Dir, path string, create, write, follow bool) (*os.File, error) {
	path, err := dir.Checked(path) // the directories from the home checked again
	if err != nil {
		return nil, err
	}
	if !follow {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, &fs.PathError{Op: "open", Path: path, Err: &fsread.TypeError{Kind: "symbolic link"}}
		}
	}
	flags := os.O_RDONLY
	if write {
		flags = os.O_RDWR
	}
	if create {
		flags |= os.O_CREATE
	}
	return os.OpenFile(path, flags, 0o644)
}

func isLink(err error) bool {
	var te *fsread.TypeError
	return errors.As(err, &te) && te.Kind == "symbolic link"
}

func denied(err error) bool { return errors.Is(err, fs.ErrPermission) }

const exclusiveWrites = false

// tryCheckoutLock cannot lock on this platform.
func tryCheckoutLock(*os.File) (bool, error) { return false, errors.ErrUnsupported }

func unlockCheckout(*os.File) {}
