package gitread

import (
	"errors"
	"fmt"
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

// hasIdentity reports whether s tells one file from another by its inode.
func (s Stamp) hasIdentity() bool { return s.present && s.ino != 0 }

// sameIdentity reports whether s and o stamp the same file, of the same
// type, permissions, owner and group (what access(2) depends on, ACLs
// aside), whatever its timestamps and size. Without inode numbers it is
// equality.
func (s Stamp) sameIdentity(o Stamp) bool {
	if !s.hasIdentity() || !o.hasIdentity() {
		return s == o
	}
	return s.present == o.present && s.dir == o.dir && s.link == o.link &&
		s.dev == o.dev && s.ino == o.ino && s.mode == o.mode &&
		s.uid == o.uid && s.gid == o.gid
}

// Present reports whether something was at the path.
func (s Stamp) Present() bool { return s.present }

// IsDir reports whether a directory was at the path.
func (s Stamp) IsDir() bool { return s.dir }

// FileID names the file s stamps by its device and inode, where the
// platform has them, else by its size and modification time.
func (s Stamp) FileID() string {
	if s.hasIdentity() {
		return fmt.Sprintf("%d:%d", s.dev, s.ino)
	}
	return fmt.Sprintf("%d@%d", s.size, s.mtime)
}

// ChangedAt is the later of the file's modification and change times.
func (s Stamp) ChangedAt() time.Time { return time.Unix(0, max(s.mtime, s.ctime)) }

// IsLink reports whether a symbolic link was at the path (lstat only).
func (s Stamp) IsLink() bool { return s.link }

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

// changedError is a read failure of the ErrChanged class.
type changedError string

func (e changedError) Error() string { return string(e) }

// Is makes every changedError match ErrChanged.
func (e changedError) Is(target error) bool { return target == ErrChanged }

// errGrew and errShrank are read failures of a file whose size changed
// between fstat and the end of its read.
var (
	errGrew   error = changedError("the file grew while it was read")
	errShrank error = changedError("the file shrank while it was read")
	// errNotRegular is the class of every "not a regular file" failure.
	errNotRegular = errors.New("not a regular file")
)

// fileTypeError says what was found where a regular file was expected.
type fileTypeError struct{ kind string }

func (e *fileTypeError) Error() string { return "is a " + e.kind + ", not a regular file" }

// Is makes every fileTypeError match errNotRegular.
func (e *fileTypeError) Is(target error) bool { return target == errNotRegular }

// tooLargeError is a file over the size limit of its read.
type tooLargeError struct{ size, limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%d bytes is over the limit of %d", e.size, e.limit)
}
