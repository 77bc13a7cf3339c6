//go:build !unix && !windows

package updater

import (
	"errors"
	"io/fs"
	"os"
)

// Lock cannot lock a file on this platform.
func Lock(path string, exclusive bool) (*os.File, error) {
	return nil, &fs.PathError{Op: "lock", Path: path, Err: errors.ErrUnsupported}
}
