//go:build unix || windows

package updater

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// SafeOpen reads the regular file at path, at most limit+1 bytes, without
// following a final link or blocking on a FIFO or device: the one careful
// read of package fsread (lstat, a non-blocking no-follow open, the
// descriptor asked again, a read of at most its size plus one byte), in
// the updater's words. Nothing at the path is absent; a path through
// something that is not a directory, and anything but a regular file of at
// most limit bytes, proves nothing.
func SafeOpen(path string, limit int64) ([]byte, FileKind, string) {
	body, st, err := fsread.ReadRegular(path, limit, true)
	switch {
	case err != nil:
		return nil, FileUnusable, unusable(err, limit)
	case st.NotDir():
		return nil, FileUnusable, "lstat: not a directory"
	case !st.Present():
		return nil, FileAbsent, ""
	case st.IsDir():
		return nil, FileUnusable, "a directory"
	}
	return body, FileRead, ""
}

// unusable says in a few words why a read's failure proves nothing.
func unusable(err error, limit int64) string {
	var te *fsread.TypeError
	var tl *fsread.TooLargeError
	var pe *fs.PathError
	switch {
	case errors.As(err, &te):
		switch te.Kind {
		case "character device", "block device":
			return "a device"
		case "special file":
			return "not a regular file"
		}
		return "a " + te.Kind
	case errors.As(err, &tl):
		return fmt.Sprintf("over %d bytes", limit)
	case errors.Is(err, fsread.ErrChanged):
		return "changed size while it was read"
	case errors.As(err, &pe):
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}
