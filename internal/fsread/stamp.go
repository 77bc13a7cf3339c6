package fsread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// Stamp is what a stat says of a file: enough to tell that it was replaced
// or rewritten. present is false when nothing is at the path.
type Stamp struct {
	present  bool
	notDir   bool // nothing at the path, because a part of it is not a directory (ENOTDIR)
	dir      bool
	link     bool // a symbolic link (only from lstat)
	dev, ino uint64
	mode     uint32
	uid, gid uint32 // the owner and group, where there are any: access(2) depends on them
	size     int64
	mtime    int64 // nanoseconds since the Unix epoch
	ctime    int64 // nanoseconds since the Unix epoch; 0 where unknown
}

// Margins of Git's "racy" rule: a file whose timestamps are not at least
// this much older than the moment its read began could be rewritten within
// the same timestamp tick without any visible change, so a Stamp of it is
// not trusted. File systems with sub-second timestamps advance them with a
// coarse clock (a scheduler tick on Linux, 15.6 ms on Windows); others keep
// whole seconds or, like FAT, two.
const (
	fineTimestampMargin   = 100 * time.Millisecond
	coarseTimestampMargin = 3 * time.Second
)

// HasIdentity reports whether s tells one file from another by its inode.
func (s Stamp) HasIdentity() bool { return s.present && s.ino != 0 }

// SameIdentity reports whether s and o stamp the same file, of the same
// type, permissions, owner and group (what access(2) depends on, ACLs
// aside), whatever its timestamps and size. Without inode numbers it is
// equality.
func (s Stamp) SameIdentity(o Stamp) bool {
	if !s.HasIdentity() || !o.HasIdentity() {
		return s == o
	}
	return s.present == o.present && s.dir == o.dir && s.link == o.link &&
		s.dev == o.dev && s.ino == o.ino && s.mode == o.mode &&
		s.uid == o.uid && s.gid == o.gid
}

// NotDir reports whether nothing was at the path because a part of the
// path is not a directory: git's ENOTDIR, which ends a ref lookup where
// ENOENT goes on to packed-refs.
func (s Stamp) NotDir() bool { return s.notDir }

// Present reports whether something was at the path.
func (s Stamp) Present() bool { return s.present }

// IsDir reports whether a directory was at the path.
func (s Stamp) IsDir() bool { return s.dir }

// FileID names the file s stamps by its device and inode, where the
// platform has them, else by its size and modification time.
func (s Stamp) FileID() string {
	if s.HasIdentity() {
		return fmt.Sprintf("%d:%d", s.dev, s.ino)
	}
	return fmt.Sprintf("%d@%d", s.size, s.mtime)
}

// DirID is the identity of the directory at path, links followed (see
// FileID): another name of the same directory (a bind mount, a ".." in
// the path) has the same one; a directory renamed into its path has
// another.
func DirID(path string) (string, error) {
	st, err := StatStamp(path)
	switch {
	case err != nil:
		return "", err
	case !st.Present() || !st.IsDir():
		return "", fmt.Errorf("%s is no directory", path)
	}
	return FileID(path, st)
}

// ChangedAt is the later of the file's modification and change times.
func (s Stamp) ChangedAt() time.Time { return time.Unix(0, max(s.mtime, s.ctime)) }

// IsLink reports whether a symbolic link was at the path (lstat only).
func (s Stamp) IsLink() bool { return s.link }

// Size is the file's size in bytes.
func (s Stamp) Size() int64 { return s.size }

// Dev is the device the file is on, where the platform tells; else 0.
func (s Stamp) Dev() uint64 { return s.dev }

// Settled reports whether s can be trusted to change if the file changes
// after readStart.
func (s Stamp) Settled(readStart time.Time) bool {
	if !s.present {
		return true
	}
	margin := int64(fineTimestampMargin)
	if s.mtime%int64(time.Second) == 0 { // whole seconds: a coarse file system
		margin = int64(coarseTimestampMargin)
	}
	limit := readStart.UnixNano() - margin
	return s.mtime < limit && s.ctime < limit
}

// ErrChanged is the class of read failures of a file that changed while
// it was read: a later read may succeed.
var ErrChanged = errors.New("changed while it was read")

// ChangedError is a read failure of the ErrChanged class, saying how the
// file changed.
type ChangedError string

func (e ChangedError) Error() string { return string(e) }

// Is makes every ChangedError match ErrChanged.
func (e ChangedError) Is(target error) bool { return target == ErrChanged }

// ErrGrew and ErrShrank are read failures of a file whose size changed
// between fstat and the end of its read.
var (
	ErrGrew   error = ChangedError("the file grew while it was read")
	ErrShrank error = ChangedError("the file shrank while it was read")
)

// ErrNotRegular is the class of every "not a regular file" failure.
var ErrNotRegular = errors.New("not a regular file")

// TypeError says what was found where a regular file was expected: Kind
// is "directory", "symbolic link", "named pipe", "socket", "character
// device", "block device" or "special file" (see TypeName).
type TypeError struct{ Kind string }

func (e *TypeError) Error() string { return "is a " + e.Kind + ", not a regular file" }

// Is makes every TypeError match ErrNotRegular.
func (e *TypeError) Is(target error) bool { return target == ErrNotRegular }

// TooLargeError is a file over the size limit of its read.
type TooLargeError struct{ Size, Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%d bytes is over the limit of %d", e.Size, e.Limit)
}

// Reader reads a regular file that OpenRegular opened, from its start: the
// bytes its fstat counted, then io.EOF once one more read finds nothing
// after them. A file that ends earlier fails with ErrShrank, one that goes
// on with ErrGrew, so that what was read is the file the Stamp describes,
// or a read failure of the ErrChanged class.
type Reader struct {
	file opened // the platform's handle of the file
	path string
	size int64 // what fstat reported
	n    int64 // bytes read so far
	err  error // the failure that ended the read, for every later call
	one  [1]byte
}

// ReadAt reads len(p) bytes of the file from offset off, within the size
// fstat reported, and leaves where Read reads from as it was. A file that
// ends earlier fails with ErrShrank.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > r.size {
		return 0, &fs.PathError{Op: "read", Path: r.path, Err: io.ErrUnexpectedEOF}
	}
	n := 0
	for n < len(p) {
		m, err := r.rawReadAt(p[n:], off+int64(n))
		n += m
		switch {
		case err != nil && !errors.Is(err, io.EOF):
			return n, &fs.PathError{Op: "read", Path: r.path, Err: err}
		case m == 0:
			return n, &fs.PathError{Op: "read", Path: r.path, Err: ErrShrank}
		}
	}
	return n, nil
}

// Read reads the next bytes of the file, at most up to the size fstat
// reported.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if r.n >= r.size {
		// One byte more tells an end from a file that grew.
		m, err := r.rawRead(r.one[:])
		switch {
		case err != nil && !errors.Is(err, io.EOF):
			r.err = &fs.PathError{Op: "read", Path: r.path, Err: err}
		case m > 0:
			r.err = &fs.PathError{Op: "read", Path: r.path, Err: ErrGrew}
		default:
			r.err = io.EOF
		}
		return 0, r.err
	}
	if rest := r.size - r.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	m, err := r.rawRead(p)
	r.n += int64(m)
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		r.err = &fs.PathError{Op: "read", Path: r.path, Err: err}
		return m, r.err
	case m == 0:
		r.err = &fs.PathError{Op: "read", Path: r.path, Err: ErrShrank}
		return 0, r.err
	}
	return m, nil
}
