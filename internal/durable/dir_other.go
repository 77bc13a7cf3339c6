//go:build !unix

package durable

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// handle is empty here: this platform has no open relative to a directory.
type handle struct{}

// open checks d's directories, making the missing ones where create: this
// platform has no open relative to a directory, so each write checks them
// again.
func (d *Dir) open(create bool) error {
	if d.root == "" {
		fi, err := os.Stat(d.path)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return &fs.PathError{Op: "open", Path: d.path, Err: fs.ErrInvalid}
		}
		return nil
	}
	if create {
		if err := d.checkRoot(); err != nil {
			return err // nothing is made in another root
		}
		at := d.root
		for _, part := range d.rel {
			at = filepath.Join(at, part)
			if err := os.Mkdir(at, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			if err := checkDir(at); err != nil {
				return err
			}
		}
	}
	return d.check()
}

// check checks that the directories from d's root down to it are
// directories, none a link (nor a junction, nor another reparse point).
func (d *Dir) check() error {
	if d.root == "" {
		return nil
	}
	if err := d.checkRoot(); err != nil {
		return err
	}
	at := d.root
	for _, part := range d.rel {
		at = filepath.Join(at, part)
		if err := checkDir(at); err != nil {
			return err
		}
	}
	return nil
}

// checkDir checks that a directory, not a link to one, is at path.
func checkDir(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeDir {
		return notDir(path, fi.Mode())
	}
	return nil
}

// Checked is the path of the entry name, once the directories from the
// root down to d are checked again: for an open this package does not
// make, such as a lock's. On a nil d, name is a path, as it is.
func (d *Dir) Checked(name string) (string, error) {
	if d == nil {
		return name, nil
	}
	if err := d.check(); err != nil {
		return "", err
	}
	return filepath.Join(d.path, name), nil
}

// Close releases the directory.
func (handle) Close() error { return nil }

// OpenFile opens the entry name with the flags of os.OpenFile, never
// through a link found at its name.
func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	p, err := d.Checked(name)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, &fs.PathError{Op: "open", Path: p, Err: notDir(p, fi.Mode())}
	}
	return os.OpenFile(p, flag, perm)
}

// Rename renames the entry old to new.
func (d *Dir) Rename(old, new string) error {
	if err := d.check(); err != nil {
		return err
	}
	return os.Rename(filepath.Join(d.path, old), filepath.Join(d.path, new))
}

// Link makes new a hard link to the entry old.
func (d *Dir) Link(old, new string) error {
	if err := d.check(); err != nil {
		return err
	}
	return os.Link(filepath.Join(d.path, old), filepath.Join(d.path, new))
}

// Remove removes the entry name.
func (d *Dir) Remove(name string) error {
	p, err := d.Checked(name)
	if err != nil {
		return err
	}
	return os.Remove(p)
}

// Lstat describes the entry name, a link itself where one is there.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	p, err := d.Checked(name)
	if err != nil {
		return nil, err
	}
	return os.Lstat(p)
}

// list opens the directory itself for a listing.
func (d *Dir) list() (*os.File, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return os.Open(d.path)
}

// sync does nothing: a directory cannot be opened for a flush here. On
// Windows, os.Rename is MoveFileEx, whose rename NTFS journals.
func (handle) sync() error { return nil }

// checkRoot checks that d's root is a directory, and the one it was pinned
// to where it was (see Root).
func (d *Dir) checkRoot() error {
	if fi, err := os.Stat(d.root); err != nil {
		return err
	} else if !fi.IsDir() {
		return notDir(d.root, fi.Mode())
	}
	if d.rootID != "" {
		if id, err := dirID(d.root); err != nil || id != d.rootID {
			return moved(d.root)
		}
	}
	return nil
}

// dirID is the identity of the directory at path: its file ID on Windows
// (see fsread.DirID); elsewhere here no file identity is told, and "" pins
// nothing.
func dirID(path string) (string, error) {
	if runtime.GOOS != "windows" {
		return "", nil
	}
	return fsread.DirID(path)
}
