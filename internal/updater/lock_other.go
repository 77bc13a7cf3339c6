//go:build !unix && !windows

package updater

import (
	"errors"
	"os"
)

// lockFile cannot lock a file on this platform.
func lockFile(*os.File, bool) error { return errors.ErrUnsupported }
