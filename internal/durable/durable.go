// Package durable replaces files atomically and durably: a reader sees the
// old content or the new, never a mix, and once a write returns the new
// content survives a crash (the file and the rename are flushed to disk).
// Every write is made in a Dir, which may be opened inside a root without
// following a link below it, so that nothing is written where a link
// leads.
package durable

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// WriteFile replaces the file at path with data: a temporary file in the
// same directory is written, flushed (fsync), closed and renamed over
// path, and then the directory is flushed so that the rename itself
// survives a crash. On failure the temporary file is removed and path is
// left as it was.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	d, err := OpenIn("", dirOf(path), false)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.WriteFile(filepath.Base(path), data, perm)
}

// CreateFile is WriteFile for a file that must not exist yet: the
// temporary file is hard-linked at path, which fails with an error
// matching fs.ErrExist when something is there, so of two processes that
// create the same path at once exactly one succeeds. Where the file system
// has no hard links, the file is created with O_EXCL and written in place:
// still exclusive, but a reader may see it empty for an instant.
func CreateFile(path string, data []byte, perm os.FileMode) error {
	d, err := OpenIn("", dirOf(path), false)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.CreateFile(filepath.Base(path), data, perm)
}

func dirOf(path string) string {
	if dir, _ := filepath.Split(path); dir != "" {
		return dir
	}
	return "."
}

// Dir is a directory opened for writes (see OpenIn). Its methods take the
// name of an entry of the directory, never a path.
type Dir struct {
	path   string   // the directory's path
	root   string   // the root the directories below it were opened from; "" where it was opened by its path
	rootID string   // the identity the root must have (see Root); "" for any
	rel    []string // the directories from root down to it
	handle          // on Unix, the directory itself, held open

	// Flushing, when not nil, is called before each flush a write waits
	// on (the file's, then the directory's): a caller that bounds each
	// wait on the file system counts each flush as one.
	Flushing func()
}

// OpenIn opens the directory dir for writes. Where root is not empty and
// dir lies in it (or is it), root is opened as it is (a root given through
// a link is the caller's choice), and every directory below it without
// following a link: a link on the way, or anything but a directory, is an
// error, and nothing is written in it or where it leads. On Unix the
// directory is held open and every write through the Dir is made relative
// to it (openat, renameat, linkat, unlinkat), so that a directory on the
// way renamed, or replaced by a link, after it was opened is never
// followed; elsewhere the directories are checked again before each
// write. With create, the missing directories are made (root too), none
// through a link. A dir outside root, or any with no root, is opened by
// its path, links followed (made as os.MkdirAll makes it, with create).
func OpenIn(root, dir string, create bool) (*Dir, error) {
	return Root{Path: root}.OpenIn(dir, create)
}

// Root is a directory that Dirs are opened in: Path, and where ID is not
// empty the identity the directory at Path must still have when a Dir is
// opened in it (see PinRoot).
type Root struct{ Path, ID string }

// PinRoot returns the Root of the directory at path, pinned to the
// identity it has now: a directory renamed there, or a link swapped in for
// it, since is refused by its OpenIn, and nothing is written in it.
func PinRoot(path string) (Root, error) {
	id, err := dirID(path)
	return Root{Path: path, ID: id}, err
}

// OpenIn is the function OpenIn in r, refusing a root that is no longer
// the directory r was pinned to.
func (r Root) OpenIn(dir string, create bool) (*Dir, error) {
	root := r.Path
	d := &Dir{path: filepath.Clean(dir)}
	if root != "" {
		rel, err := filepath.Rel(root, dir)
		if err == nil && (rel == "." || filepath.IsLocal(rel)) {
			d.root, d.rootID = root, r.ID
			if rel != "." {
				d.rel = strings.Split(rel, string(filepath.Separator))
			}
		}
	}
	if create {
		top := d.path
		if d.root != "" {
			top = d.root
		}
		if err := os.MkdirAll(top, 0o755); err != nil {
			return nil, err
		}
	}
	if err := d.open(create); err != nil {
		return nil, err
	}
	return d, nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// moved is the error of a root that is no longer the directory it was
// pinned to: nothing is made in it.
func moved(root string) error {
	return fmt.Errorf("%s is no longer the directory it was when it was opened first (renamed, or replaced by a link): nothing is written in it", root)
}

// notDir is the error of a directory on the way from a root that is a
// link or another file: nothing is made in it or where it leads.
func notDir(path string, mode fs.FileMode) error {
	kind := "regular file"
	if !mode.IsRegular() {
		kind = fsread.TypeName(mode)
	}
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("a %s, not a directory: nothing is made in it or where it leads", kind)}
}

// Names lists the entries of the directory that keep takes, reading at
// most max entries (see fsread.ListNames).
func (d *Dir) Names(max int, keep func(name string) bool) ([]string, error) {
	f, err := d.list()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return fsread.ListNames(f, max, keep)
}

// WriteFile replaces the entry name with data, as the function WriteFile
// does.
func (d *Dir) WriteFile(name string, data []byte, perm os.FileMode) error {
	return d.write(name, data, perm, func(tmp string) error { return d.Rename(tmp, name) })
}

// CreateFile writes the entry name, which must not exist yet, as the
// function CreateFile does.
func (d *Dir) CreateFile(name string, data []byte, perm os.FileMode) error {
	err := d.write(name, data, perm, func(tmp string) error {
		if err := d.Link(tmp, name); err != nil {
			return err
		}
		return d.Remove(tmp)
	})
	var le *os.LinkError
	if err == nil || errors.Is(err, fs.ErrExist) || !errors.As(err, &le) {
		return err
	}
	f, err := d.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		d.flushing()
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = d.Remove(name)
		return err
	}
	d.flushing()
	return d.sync()
}

// write writes data to a temporary entry beside name, flushes it, and
// puts it in place with place; on failure the temporary entry is
// removed.
func (d *Dir) write(name string, data []byte, perm os.FileMode, place func(tmp string) error) (err error) {
	tmp, f, err := d.createTemp("." + name + ".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			_ = d.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	d.flushing()
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := place(tmp); err != nil {
		return err
	}
	d.flushing()
	return d.sync()
}

// flushing calls d.Flushing, if set.
func (d *Dir) flushing() {
	if d.Flushing != nil {
		d.Flushing()
	}
}

// createTemp creates a new entry whose name starts with prefix, for
// reading and writing, as os.CreateTemp does.
func (d *Dir) createTemp(prefix string) (string, *os.File, error) {
	for try := 0; ; try++ {
		var b [8]byte
		_, _ = rand.Read(b[:])
		name := prefix + hex.EncodeToString(b[:])
		f, err := d.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		return name, f, err
	}
}
