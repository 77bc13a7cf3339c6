//go:build !unix

package fsread

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// StatStamp stats path. Without inode numbers or a change time, a Stamp is
// the type, size and modification time; the racy rule in stamp.settled is
// what makes it sound.
func StatStamp(path string) (Stamp, error) {
	fi, err := os.Stat(path)
	return stampOfStat(path, fi, err)
}

// LstatStamp is StatStamp without following a final symbolic link.
func LstatStamp(path string) (Stamp, error) {
	fi, err := os.Lstat(path)
	return stampOfStat(path, fi, err)
}

func stampOfStat(path string, fi fs.FileInfo, err error) (Stamp, error) {
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return absentStamp(path, err), nil
		}
		return Stamp{}, err
	}
	return stampOfInfo(fi), nil
}

// absentStamp is the stamp of nothing at path, which err (not-exist) said:
// git's ENOTDIR when a part of path is not a directory, else its ENOENT.
// The parents are looked at only where the error leaves it open: a stat
// of an absent file in a directory that exists (a packed branch's loose
// ref, on every check of the stat path) costs nothing more.
func absentStamp(path string, err error) Stamp {
	if finalMissing(err) {
		return Stamp{}
	}
	return Stamp{notDir: !validDirPrefix(path)}
}

// validDirPrefix reports whether the nearest part of path above it that
// exists is a directory: nothing at path is then git's ENOENT, else its
// ENOTDIR (Git for Windows tells the two apart this way).
func validDirPrefix(path string) bool {
	for p := filepath.Dir(path); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		switch {
		case err == nil:
			return fi.IsDir()
		case !errors.Is(err, fs.ErrNotExist):
			return true
		case filepath.Dir(p) == p:
			return true
		}
	}
}

// stampOfInfo keeps the type bits of the mode only: permission bits are
// derived differently from a path and from a handle on some platforms.
func stampOfInfo(fi fs.FileInfo) Stamp {
	return Stamp{
		present: true,
		dir:     fi.IsDir(),
		link:    fi.Mode()&fs.ModeSymlink != 0,
		mode:    uint32(fi.Mode().Type()),
		size:    fi.Size(),
		mtime:   fi.ModTime().UnixNano(),
	}
}

// checkInfo decides on a stat before a read: done is true when there is
// nothing to read, with the Stamp of a directory or an error.
func checkInfo(path string, fi fs.FileInfo, limit int64) (s Stamp, done bool, err error) {
	switch {
	case fi.Mode().IsRegular():
	case fi.IsDir():
		return stampOfInfo(fi), true, nil
	default:
		return Stamp{}, true, &fs.PathError{Op: "read", Path: path, Err: &TypeError{Kind: TypeName(fi.Mode())}}
	}
	if fi.Size() > limit {
		return Stamp{}, true, &fs.PathError{Op: "read", Path: path, Err: &TooLargeError{Size: fi.Size(), Limit: limit}}
	}
	return Stamp{}, false, nil
}

// readOpened reads f whole when fi, its stat, says it is a regular file of
// at most limit bytes: at most its size plus one byte, into a buffer of
// that size, and a size that changed meanwhile is a read failure.
func readOpened(path string, f io.Reader, fi fs.FileInfo, limit int64) ([]byte, Stamp, error) {
	if s, done, err := checkInfo(path, fi, limit); done {
		if err == nil {
			err = &fs.PathError{Op: "read", Path: path, Err: &TypeError{Kind: "directory"}}
		}
		return nil, s, err
	}
	buf := make([]byte, fi.Size()+1)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, Stamp{}, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	switch {
	case int64(n) > fi.Size():
		return nil, Stamp{}, &fs.PathError{Op: "read", Path: path, Err: ErrGrew}
	case int64(n) < fi.Size():
		return nil, Stamp{}, &fs.PathError{Op: "read", Path: path, Err: ErrShrank}
	}
	return buf[:n], stampOfInfo(fi), nil
}

// SystemReadEnds is absent here: files are read whole.
var SystemReadEnds func(path string, n int, nofollow bool) (head, tail []byte, st Stamp, err error)

// ReadRegular reads the regular file at path whole, following a final link
// unless nofollow. It asks stat what is there before it opens anything, and
// the opened file again before it reads (a link swapped in meanwhile is
// refused where the platform can open a link itself, see openNoFollow): opening a regular path does not
// block here, and a device or pipe is refused by type. Nothing at the path
// is a Stamp that is not present and no error; a directory is a Stamp with
// dir set and no data; anything else that is not a regular file is an
// error naming its type.
func ReadRegular(path string, limit int64, nofollow bool) ([]byte, Stamp, error) {
	f, fi, s, err := openChecked(path, limit, nofollow)
	if f == nil {
		return nil, s, err
	}
	defer f.Close()
	return readOpened(path, f, fi, limit)
}

// openChecked stats path (lstat for nofollow) and opens it when it may be
// read, returning the opened file and its own stat: f is nil when there is
// nothing to read, with the Stamp of nothing or of a directory, or an
// error.
func openChecked(path string, limit int64, nofollow bool) (f *os.File, fi fs.FileInfo, s Stamp, err error) {
	stat := os.Stat
	if nofollow {
		stat = os.Lstat
	}
	if fi, err = stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, absentStamp(path, err), nil
		}
		return nil, nil, Stamp{}, err
	}
	if s, done, err := checkInfo(path, fi, limit); done {
		return nil, nil, s, err
	}
	open := OpenShared // a writer may delete the file while it is open
	if nofollow {
		open = openNoFollow
	}
	if f, err = open(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, absentStamp(path, err), nil
		}
		return nil, nil, Stamp{}, err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, Stamp{}, err
	}
	return f, fi, Stamp{}, nil
}

// Regular reports whether the Stamp is of a regular file.
func (s Stamp) Regular() bool { return s.present && fs.FileMode(s.mode).IsRegular() }

// IsLinkLoop reports a read without following that met a link swapped in
// since its lstat: here the opened file's type says so.
func IsLinkLoop(err error) bool {
	var te *TypeError
	return errors.As(err, &te) && te.Kind == "symbolic link"
}

// Searchable is what git asks of a Git directory's objects and refs. Git
// for Windows drops X_OK from access(2): anything there will do.
func Searchable(_ string, st Stamp) bool { return st.present }

// SearchableNow is Searchable asked of what is at path now, with no stamp:
// ok is false, since here the answer is a stamp's.
func SearchableNow(string) (searchable, ok bool) { return false, false }

// OpenRegular opens the regular file at path for one read from its start
// to its end, with the care of ReadRegular. The Reader gives the bytes the
// opened file's stat counted and then io.EOF, or fails with ErrGrew or
// ErrShrank where the file's size changed meanwhile: a large file is read
// through a buffer of the caller's, never whole. Nothing at the path, or
// a directory, is a nil Reader, its Stamp saying which, and no error.
func OpenRegular(path string, limit int64, nofollow bool) (*Reader, Stamp, error) {
	f, fi, s, err := openChecked(path, limit, nofollow)
	if f == nil {
		return nil, s, err
	}
	if s, done, err := checkInfo(path, fi, limit); done {
		f.Close()
		if err == nil {
			err = &fs.PathError{Op: "read", Path: path, Err: &TypeError{Kind: "directory"}}
		}
		return nil, s, err
	}
	return &Reader{file: opened{f: f}, path: path, size: fi.Size()}, stampOfInfo(fi), nil
}

// opened is a Reader's file, nil once closed.
type opened struct{ f *os.File }

// rawRead is one read of the opened file; its end is io.EOF.
func (r *Reader) rawRead(p []byte) (int, error) {
	if r.file.f == nil {
		return 0, os.ErrClosed
	}
	return r.file.f.Read(p)
}

// rawReadAt is one read of the opened file at off; its end is io.EOF.
func (r *Reader) rawReadAt(p []byte, off int64) (int, error) {
	if r.file.f == nil {
		return 0, os.ErrClosed
	}
	return r.file.f.ReadAt(p, off)
}

// Close closes the file.
func (r *Reader) Close() error {
	if r.file.f == nil {
		return nil
	}
	err := r.file.f.Close()
	r.file.f = nil
	return err
}
