package gitread

import (
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// How the files of a checkout are read, and what a read depended on.

// Dep is one file an answer depends on, with its stamp when it was read. A
// stamp that is not present records that nothing was at the path. A
// NoFollow dep is stamped by lstat: a symbolic link itself, a loose ref, a
// directory on the way to the module.
type Dep struct {
	Path     string
	NoFollow bool
	// Identity, for a directory whose entries do not matter (a Git
	// directory's objects and refs), is one of which git asks only that
	// access(2) for X_OK passes. Unchanged compares what is at Path, not
	// its timestamps (a commit that adds an object directory reads
	// nothing again; where a stamp has no inode number, the whole stamp),
	// and asks access(2) again: it depends on the owner, the group, the
	// mode, any ACL (changed in place, it moves no stamp but the change
	// time) and the process's own credentials. Holds, where it passed,
	// asks access(2) alone.
	Identity bool
	Stamp    fsread.Stamp
	// searchable is what access(2) for X_OK said of an Identity dep.
	searchable bool
}

// Deps are the files one read depended on.
type Deps []Dep

// Unchanged reports whether every dependency still has the stamp it had.
func (d Deps) Unchanged(fs *FS) bool {
	for i := range d {
		if !d[i].Unchanged(fs) {
			return false
		}
	}
	return true
}

// Unchanged reports whether the dependency still has the stamp it had.
func (d *Dep) Unchanged(fs *FS) bool {
	stat := fs.Stat
	if d.NoFollow {
		stat = fs.Lstat
	}
	st, err := stat(d.Path)
	if err != nil || !(st == d.Stamp || d.Identity && st.SameIdentity(d.Stamp)) {
		return false
	}
	return !d.Identity || fsread.Searchable(d.Path, st) == d.searchable
}

// Holds reports whether what the read found at the dependency still
// stands for git: Unchanged, but of an Identity dep found searchable it
// asks only what git asks, access(2) for X_OK (see isGitDir), where there
// is one: whatever is there now, git's verdict is the same while that
// passes. It proves an answer whose every dependency is asked anew by its
// path (the stat path); not what a watch armed on the read's routes
// watches, which Unchanged proves.
func (d *Dep) Holds(fs *FS) bool {
	if d.Identity && d.searchable {
		if ok, asked := fsread.SearchableNow(d.Path); asked {
			return ok
		}
	}
	return d.Unchanged(fs)
}

// Settled reports whether every stamp can be trusted to change if its file
// changes after readStart: see Stamp.Settled.
func (d Deps) Settled(readStart time.Time) bool {
	for i := range d {
		if !(d[i].Identity && d[i].Stamp.HasIdentity()) && !d[i].Stamp.Settled(readStart) {
			return false
		}
	}
	return true
}

// unique drops repeated dependencies: a file read twice with the same
// stamp needs one stat.
func (d Deps) unique() Deps {
	out := d[:0:0]
	for _, x := range d {
		seen := false
		for _, o := range out {
			if o == x {
				seen = true
				break
			}
		}
		if !seen {
			out = append(out, x)
		}
	}
	return out
}

// FS is what a read touches of the file system, replaceable for tests.
type FS struct {
	// Stat and Lstat stamp a path, following a final link or not; nothing
	// at the path is a stamp that is not present.
	Stat, Lstat func(path string) (fsread.Stamp, error)
	// ReadFile reads a Git file whole: see fsread.ReadRegular.
	ReadFile func(path string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error)
	// Open, when not nil, opens a Git file for one read from its start to
	// its end (see fsread.OpenRegular): a large index is read through a
	// buffer, not whole. Without it, ReadFile reads it.
	Open func(path string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error)
	// ReadEnds, when not nil, reads the first and last bytes of a file
	// (see ReadEnds): a large index or packed-refs whose ends cannot be
	// one's is refused without being read whole.
	ReadEnds func(path string, n int, nofollow bool) (head, tail []byte, st fsread.Stamp, err error)
}

// System is the file system itself.
var System = &FS{Stat: fsread.StatStamp, Lstat: fsread.LstatStamp, ReadFile: fsread.ReadRegular, Open: openRegular, ReadEnds: fsread.SystemReadEnds}

// openRegular is fsread.OpenRegular, with nothing there (or a directory)
// a nil ReadCloser, its Stamp saying which.
func openRegular(path string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
	f, st, err := fsread.OpenRegular(path, limit, nofollow)
	if f == nil {
		return nil, st, err
	}
	return f, st, nil
}

// headBytes is how much of each end of a large index or packed-refs is
// read, and checked, before the whole.
const headBytes = 4096

// contentError is a read failure decided by what files the read depends
// on say (each recorded in its Deps): while none of them changes, a read
// again fails the same way.
type contentError struct{ err error }

func (e *contentError) Error() string { return e.err.Error() }

func (e *contentError) Unwrap() error { return e.err }

// FromContent reports whether err is a read failure decided by the content
// of files recorded in the read's Deps: while they are unchanged, the
// same read fails the same way, and need not be made again.
func FromContent(err error) bool {
	var ce *contentError
	return errors.As(err, &ce)
}

// checkEnds reads the ends of the file at path when it is larger than
// twice headBytes and refuses it, recorded as a dependency, when check
// says they cannot be what it should: a file that would fail its parse is
// not read whole (a file made sparse, zeros after its content, say).
func (r *reader) checkEnds(path string, check func(head, tail []byte, size int64) error) error {
	if r.fs.ReadEnds == nil {
		return nil
	}
	head, tail, st, err := r.fs.ReadEnds(path, headBytes, false)
	if err != nil || !st.Regular() || st.Size() <= 2*headBytes || len(head) == 0 || len(tail) == 0 {
		return nil // the whole read says what is wrong, or costs little
	}
	if err := check(head, tail, st.Size()); err != nil {
		r.addDep(path, false, st)
		return &contentError{&fs.PathError{Op: "read", Path: path, Err: err}}
	}
	return nil
}
