//go:build !unix && !windows

package updater

import (
	"errors"
	"os"
)

func openLockProbe(path string) (*os.File, error) { return os.Open(path) }

// tryCheckoutLock cannot lock on this platform.
func tryCheckoutLock(*os.File) (bool, error) { return false, errors.ErrUnsupported }

func unlockCheckout(*os.File) {}
