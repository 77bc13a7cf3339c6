//go:build unix

package fsread

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// SafeOpens says that a read asked not to follow a final link neither
// follows one nor blocks on a FIFO or device: here O_NOFOLLOW|O_NONBLOCK.
const SafeOpens = true

// StatStamp stats path, following links as the reads of Git's files do.
// Nothing at the path, or a path through something that is not a
// directory, is a stamp that is not present.
func StatStamp(path string) (Stamp, error) { return stampPath(path, false) }

// LstatStamp is StatStamp without following a final symbolic link.
func LstatStamp(path string) (Stamp, error) { return stampPath(path, true) }

// stampPath stats or lstats path. The calls are direct, so that the
// Stat_t stays on the stack: a check of an unchanged checkout allocates
// nothing of its own.
func stampPath(path string, nofollow bool) (Stamp, error) {
	var st unix.Stat_t
	var err error
	for {
		if nofollow {
			err = unix.Lstat(path, &st)
		} else {
			err = unix.Stat(path, &st)
		}
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		if s, ok := absentStamp(err); ok {
			return s, nil
		}
		op := "stat"
		if nofollow {
			op = "lstat"
		}
		return Stamp{}, &fs.PathError{Op: op, Path: path, Err: err}
	}
	return stampOf(&st), nil
}

func stampOf(st *unix.Stat_t) Stamp {
	m, c := st.Mtim, st.Ctim
	return Stamp{
		present: true,
		dir:     st.Mode&unix.S_IFMT == unix.S_IFDIR,
		link:    st.Mode&unix.S_IFMT == unix.S_IFLNK,
		dev:     uint64(st.Dev),
		ino:     uint64(st.Ino),
		mode:    uint32(st.Mode),
		uid:     st.Uid,
		gid:     st.Gid,
		size:    st.Size,
		mtime:   m.Nano(),
		ctime:   c.Nano(),
	}
}

// typeName names a file type for an error.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "named pipe"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFDIR:
		return "directory"
	}
	return "special file"
}

// ReadRegular reads the regular file at path whole, following a final
// link unless nofollow. It asks stat what is there before it opens
// anything, so a device is never opened; opens with O_NONBLOCK, so that a
// FIFO swapped in meanwhile cannot block; asks the descriptor again; and
// reads at most the size fstat reported plus one byte into a buffer of that
// size: a file that grew or shrank meanwhile is a read failure.
//
// Nothing at the path is a Stamp that is not present and no error; a
// directory is a Stamp with dir set and no data. Anything else that is not
// a regular file is an error naming its type. The Stamp comes from the
// descriptor the data was read through.
func ReadRegular(path string, limit int64, nofollow bool) ([]byte, Stamp, error) {
	return readRegular(path, limit, nofollow, 0, nil)
}

// ReadEnds is ReadRegular reading at most the first n bytes and the last
// n: enough to tell a file that cannot be what it should be before it is
// read whole. The Stamp is of the whole file.
func ReadEnds(path string, n int, nofollow bool) (head, tail []byte, st Stamp, err error) {
	var tailBuf []byte
	head, st, err = readRegular(path, 1<<62, nofollow, n, &tailBuf)
	return head, tailBuf, st, err
}

// SystemReadEnds is ReadEnds where the platform has it.
var SystemReadEnds = ReadEnds

// readRegular is ReadRegular, or with head > 0 ReadEnds, which sets
// *tail.
func readRegular(path string, limit int64, nofollow bool, head int, tail *[]byte) ([]byte, Stamp, error) {
	var st unix.Stat_t
	fd, s, err := openChecked(path, limit, nofollow, &st)
	if fd < 0 {
		return nil, s, err
	}
	defer unix.Close(fd)
	if head > 0 {
		buf := make([]byte, min(int64(head), st.Size))
		n, err := ReadFull(fd, buf)
		if err != nil {
			return nil, Stamp{}, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		t := make([]byte, min(int64(head), st.Size))
		err = IgnoringEINTR(func() error {
			m, err := unix.Pread(fd, t, st.Size-int64(len(t)))
			t = t[:max(m, 0)]
			return err
		})
		if err != nil {
			return nil, Stamp{}, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		*tail = t
		return buf[:n], stampOf(&st), nil
	}
	buf := make([]byte, st.Size+1)
	n, err := ReadFull(fd, buf)
	if err != nil {
		return nil, Stamp{}, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	switch {
	case int64(n) > st.Size:
		return nil, Stamp{}, &fs.PathError{Op: "read", Path: path, Err: ErrGrew}
	case int64(n) < st.Size:
		return nil, Stamp{}, &fs.PathError{Op: "read", Path: path, Err: ErrShrank}
	}
	return buf[:n], stampOf(&st), nil
}

// OpenRegular opens the regular file at path for one read from its start
// to its end, with the care of ReadRegular: stat before open, O_NONBLOCK,
// fstat, regular files of at most limit bytes only. The Reader gives the
// bytes fstat counted and then io.EOF, or fails with ErrGrew or ErrShrank
// where the file's size changed meanwhile: a large file is read through a
// buffer of the caller's, never whole. Nothing at the path, or a
// directory, is a nil Reader, its Stamp saying which, and no error. The
// Stamp comes from the descriptor the data is read through.
func OpenRegular(path string, limit int64, nofollow bool) (*Reader, Stamp, error) {
	var st unix.Stat_t
	fd, s, err := openChecked(path, limit, nofollow, &st)
	if fd < 0 {
		return nil, s, err
	}
	return &Reader{file: opened{fd: fd}, path: path, size: st.Size}, stampOf(&st), nil
}

// opened is a Reader's descriptor, -1 once closed.
type opened struct{ fd int }

// rawRead is one read(2) of the descriptor.
func (r *Reader) rawRead(p []byte) (int, error) {
	var m int
	err := IgnoringEINTR(func() error {
		var err error
		m, err = unix.Read(r.file.fd, p)
		return err
	})
	return max(m, 0), err
}

// rawReadAt is one pread(2) of the descriptor.
func (r *Reader) rawReadAt(p []byte, off int64) (int, error) {
	var m int
	err := IgnoringEINTR(func() error {
		var err error
		m, err = unix.Pread(r.file.fd, p, off)
		return err
	})
	return max(m, 0), err
}

// Close closes the descriptor.
func (r *Reader) Close() error {
	if r.file.fd < 0 {
		return nil
	}
	err := unix.Close(r.file.fd)
	r.file.fd = -1
	return err
}

// openChecked stats path, opens it and asks the descriptor again: fd is
// -1 when there is nothing to read, with the Stamp of nothing or of a
// directory, or an error. Otherwise st is the descriptor's fstat.
func openChecked(path string, limit int64, nofollow bool, st *unix.Stat_t) (fd int, s Stamp, err error) {
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY
	if nofollow {
		flags |= unix.O_NOFOLLOW
	}
	// The calls are direct, not through a function value, so that the
	// Stat_t stays on the stack.
	if err := IgnoringEINTR(func() error {
		if nofollow {
			return unix.Lstat(path, st)
		}
		return unix.Stat(path, st)
	}); err != nil {
		if s, ok := absentStamp(err); ok {
			return -1, s, nil
		}
		op := "stat"
		if nofollow {
			op = "lstat"
		}
		return -1, Stamp{}, &fs.PathError{Op: op, Path: path, Err: err}
	}
	if s, done, err := checkRegular(path, st, limit); done {
		return -1, s, err
	}
	err = IgnoringEINTR(func() error {
		var err error
		fd, err = unix.Open(path, flags, 0)
		return err
	})
	if err != nil {
		if s, ok := absentStamp(err); ok {
			return -1, s, nil // removed since the stat: as if stat came later
		}
		return -1, Stamp{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if err := IgnoringEINTR(func() error { return unix.Fstat(fd, st) }); err != nil {
		unix.Close(fd)
		return -1, Stamp{}, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if s, done, err := checkRegular(path, st, limit); done {
		unix.Close(fd)
		if err == nil { // a directory swapped in since the stat
			err = &fs.PathError{Op: "read", Path: path, Err: &TypeError{Kind: "directory"}}
		}
		return -1, s, err
	}
	return fd, Stamp{}, nil
}

// checkRegular decides on a stat before a read: done is true when there is
// nothing to read, with the Stamp of a directory or an error.
func checkRegular(path string, st *unix.Stat_t, limit int64) (s Stamp, done bool, err error) {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return stampOf(st), true, nil
	default:
		return Stamp{}, true, &fs.PathError{Op: "read", Path: path, Err: &TypeError{Kind: typeName(uint32(st.Mode))}}
	}
	if st.Size > limit {
		return Stamp{}, true, &fs.PathError{Op: "read", Path: path, Err: &TooLargeError{Size: st.Size, Limit: limit}}
	}
	return Stamp{}, false, nil
}

// Regular reports whether the Stamp is of a regular file.
func (s Stamp) Regular() bool { return s.present && s.mode&unix.S_IFMT == unix.S_IFREG }

// IsLinkLoop reports an open with O_NOFOLLOW that met a symbolic link.
func IsLinkLoop(err error) bool { return errors.Is(err, unix.ELOOP) }

// Searchable is access(2) for X_OK, which git asks of a Git directory's
// objects and refs.
func Searchable(path string, _ Stamp) bool {
	for {
		err := unix.Access(path, unix.X_OK)
		if !errors.Is(err, unix.EINTR) {
			return err == nil
		}
	}
}

// SearchableNow is Searchable asked of what is at path now, with no stamp:
// access(2) itself. ok is false where the answer needs a fresh stamp.
func SearchableNow(path string) (searchable, ok bool) { return Searchable(path, Stamp{}), true }

// absentStamp is the stamp of nothing at a path, for the errors that mean
// nothing is there: ENOENT, and ENOTDIR (a part of the path is not a
// directory), which git tells apart.
func absentStamp(err error) (Stamp, bool) {
	switch {
	case errors.Is(err, unix.ENOENT):
		return Stamp{}, true
	case errors.Is(err, unix.ENOTDIR):
		return Stamp{notDir: true}, true
	}
	return Stamp{}, false
}

// openDir opens the directory dir for a listing. Something else there
// is refused as it is opened (ENOTDIR): a FIFO is never waited on.
func openDir(dir string) (*os.File, error) {
	var fd int
	err := IgnoringEINTR(func() error {
		var err error
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// FileID names the file at path, whose lstat is st, by its device and
// inode: a file renamed over it is another, a write in place is not.
func FileID(_ string, st Stamp) (string, error) { return st.FileID(), nil }

// FdFileID is FileID of the file open at fd.
func FdFileID(fd int) (string, error) {
	var st unix.Stat_t
	if err := IgnoringEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return "", err
	}
	return stampOf(&st).FileID(), nil
}
