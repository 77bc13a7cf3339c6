//go:build unix

package updater

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/durable"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// openLock opens the lock file at path (the entry path of dir, where dir
// is not nil: relative to its descriptor) without blocking (a FIFO
// planted at the path opens at once), without becoming its terminal, and,
// unless follow, without following a link at its name (O_NOFOLLOW):
// created where missing when create (never where a link leads), for
// reading and writing when write, for reading alone otherwise. Anything
// but a regular file is refused with an error matching
// fsread.ErrNotRegular.
func openLock(dir *durable.Dir, path string, create, write, follow bool) (*os.File, error) {
	at, name := unix.AT_FDCWD, path
	if dir != nil {
		at, path = dir.Fd(), filepath.Join(dir.Path(), name)
	}
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY
	if write {
		flags = flags&^unix.O_RDONLY | unix.O_RDWR
	}
	if create {
		flags |= unix.O_CREAT
	}
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	var fd int
	err := fsread.IgnoringEINTR(func() (err error) {
		fd, err = unix.Openat(at, name, flags, 0o644)
		return err
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return regularOnly(os.NewFile(uintptr(fd), path))
}

// isLink reports whether err is an open that O_NOFOLLOW refused because
// a link is at the path (ELOOP; EMLINK on FreeBSD and DragonFly, EFTYPE
// on NetBSD).
func isLink(err error) bool {
	return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK) || runtime.GOOS == "netbsd" && errors.Is(err, unix.Errno(79))
}

// denied reports whether err is an open that the file's permissions or a
// read-only file system refused.
func denied(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS)
}

// exclusiveWrites is whether an exclusive lock (a probe's try of the
// checkout lock too) needs the file open for writing: AIX locks by
// fcntl(2), whose exclusive lock wants it.
const exclusiveWrites = runtime.GOOS == "aix"

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
