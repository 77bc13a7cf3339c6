//go:build unix

package updater

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/sysx"
)

// SafeOpen opens path with O_NONBLOCK|O_NOFOLLOW, asks the descriptor what
// it is, and reads at most limit+1 bytes. It goes through unix.Open and
// unix.Read rather than os.OpenFile: an *os.File opened with O_NONBLOCK
// joins the runtime poller, and a read of a FIFO would park.
func SafeOpen(path string, limit int64) ([]byte, FileKind, string) {
	// An lstat first keeps us from opening a device, whose open can have
	// side effects; the descriptor is checked again after the open.
	var st unix.Stat_t
	if err := sysx.IgnoringEINTR(func() error { return unix.Lstat(path, &st) }); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, FileAbsent, ""
		}
		return nil, FileUnusable, "lstat: " + err.Error()
	}
	if why := unusable(&st, limit); why != "" {
		return nil, FileUnusable, why
	}
	var fd int
	err := sysx.IgnoringEINTR(func() error {
		var err error
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		return err
	})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, FileAbsent, ""
		}
		return nil, FileUnusable, "open: " + err.Error()
	}
	defer unix.Close(fd)
	if err := sysx.IgnoringEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return nil, FileUnusable, "fstat: " + err.Error()
	}
	if why := unusable(&st, limit); why != "" {
		return nil, FileUnusable, why
	}
	// Read one byte more than fstat reported: a file that changed size
	// while it was read proves nothing.
	buf := make([]byte, st.Size+1)
	n, err := sysx.ReadFull(fd, buf)
	if err != nil {
		return nil, FileUnusable, "read: " + err.Error()
	}
	if int64(n) != st.Size {
		return nil, FileUnusable, "changed size while it was read"
	}
	return buf[:n], FileRead, ""
}

// unusable says why a stat shows a file that proves nothing: anything but
// a regular file, or one over limit bytes.
func unusable(st *unix.Stat_t, limit int64) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a named pipe"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	default:
		return "not a regular file"
	}
	if st.Size > limit {
		return fmt.Sprintf("over %d bytes", limit)
	}
	return ""
}
