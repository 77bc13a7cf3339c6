//go:build unix

package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// handle is the directory a Dir writes in, held open: every write is made
// relative to it.
type handle struct{ f *os.File }

// open opens d's directory: its root following links, each directory
// below it with O_NOFOLLOW, from the one before it (made first where
// create).
func (d *Dir) open(create bool) error {
	if d.root == "" {
		fd, err := openat(unix.AT_FDCWD, d.path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return &fs.PathError{Op: "open", Path: d.path, Err: err}
		}
		d.f = os.NewFile(uintptr(fd), d.path)
		return nil
	}
	at := d.root
	fd, err := openat(unix.AT_FDCWD, at, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: at, Err: err}
	}
	if d.rootID != "" {
		if id, err := fsread.FdFileID(fd); err != nil || id != d.rootID {
			unix.Close(fd)
			return moved(at)
		}
	}
	for _, part := range d.rel {
		at = filepath.Join(at, part)
		if create {
			if err := unix.Mkdirat(fd, part, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return &fs.PathError{Op: "mkdir", Path: at, Err: err}
			}
		}
		next, err := openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if err != nil {
			var st unix.Stat_t
			serr := unix.Fstatat(fd, part, &st, unix.AT_SYMLINK_NOFOLLOW)
			unix.Close(fd)
			if serr == nil && uint32(st.Mode)&unix.S_IFMT != unix.S_IFDIR {
				return notDir(at, modeOf(uint32(st.Mode)))
			}
			return &fs.PathError{Op: "open", Path: at, Err: err}
		}
		unix.Close(fd)
		fd = next
	}
	d.f = os.NewFile(uintptr(fd), d.path)
	return nil
}

// openat is unix.Openat with O_CLOEXEC, retried on EINTR.
func openat(dir int, name string, flags int, perm uint32) (fd int, err error) {
	err = fsread.IgnoringEINTR(func() error {
		fd, err = unix.Openat(dir, name, flags|unix.O_CLOEXEC, perm)
		return err
	})
	return fd, err
}

// Close closes the directory.
func (h handle) Close() error { return h.f.Close() }

// Fd is the directory's descriptor, for an open relative to it.
func (d *Dir) Fd() int { return int(d.f.Fd()) }

// OpenFile opens the entry name with the flags of os.OpenFile, never
// through a link at its name (O_NOFOLLOW).
func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	fd, err := openat(d.Fd(), name, flag|unix.O_NOFOLLOW, uint32(perm.Perm()))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(d.path, name), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.path, name)), nil
}

// Rename renames the entry old to new.
func (d *Dir) Rename(old, new string) error {
	if err := unix.Renameat(d.Fd(), old, d.Fd(), new); err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(d.path, old), New: filepath.Join(d.path, new), Err: err}
	}
	return nil
}

// Link makes new a hard link to the entry old (a link there is linked, not
// followed).
func (d *Dir) Link(old, new string) error {
	if err := linkat(d.Fd(), old, new); err != nil {
		return &os.LinkError{Op: "link", Old: filepath.Join(d.path, old), New: filepath.Join(d.path, new), Err: err}
	}
	return nil
}

// Remove removes the entry name, a directory's too where it is empty.
func (d *Dir) Remove(name string) error {
	err := unix.Unlinkat(d.Fd(), name, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		if derr := unix.Unlinkat(d.Fd(), name, unix.AT_REMOVEDIR); derr == nil || !errors.Is(derr, unix.ENOTDIR) {
			err = derr
		}
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

// Lstat describes the entry name, a link itself where one is there.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: filepath.Join(d.path, name), Err: err}
	}
	return &fileInfo{name: name, size: st.Size, mode: modeOf(uint32(st.Mode)), mtime: time.Unix(st.Mtim.Unix())}, nil
}

// list opens the directory itself for a listing.
func (d *Dir) list() (*os.File, error) {
	fd, err := openat(d.Fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.path, Err: err}
	}
	return os.NewFile(uintptr(fd), d.path), nil
}

// sync flushes the directory, so that a rename in it survives a crash.
func (h handle) sync() error { return h.f.Sync() }

// modeOf is the fs.FileMode of a stat's st_mode.
func modeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFREG:
	default:
		mode |= fs.ModeIrregular
	}
	return mode
}

// fileInfo is what Lstat tells of an entry.
type fileInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.size }
func (fi *fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *fileInfo) ModTime() time.Time { return fi.mtime }
func (fi *fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *fileInfo) Sys() any           { return nil }

// dirID is the identity of the directory at path (links followed): its
// device and inode (see fsread.DirID).
func dirID(path string) (string, error) { return fsread.DirID(path) }
