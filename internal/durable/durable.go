// Package durable replaces files atomically and durably: a reader sees the
// old content or the new, never a mix, and once WriteFile returns the new
// content survives a crash (the file and the rename are flushed to disk).
package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces the file at path with data: a temporary file in the
// same directory is written, flushed (fsync), closed and renamed over
// path, and then the directory is flushed so that the rename itself
// survives a crash. On failure the temporary file is removed and path is
// left as it was.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, os.Rename)
}

// CreateFile is WriteFile for a file that must not exist yet: the
// temporary file is hard-linked at path, which fails with an error
// matching fs.ErrExist when something is there, so of two processes that
// create the same path at once exactly one succeeds. Where the file system
// has no hard links, the file is created with O_EXCL and written in place:
// still exclusive, but a reader may see it empty for an instant.
func CreateFile(path string, data []byte, perm os.FileMode) error {
	err := write(path, data, perm, func(tmp, path string) error {
		if err := os.Link(tmp, path); err != nil {
			return err
		}
		return os.Remove(tmp)
	})
	var le *os.LinkError
	if err == nil || errors.Is(err, fs.ErrExist) || !errors.As(err, &le) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return err
	}
	return syncDir(dirOf(path))
}

// write writes data to a temporary file beside path, flushes it, and puts
// it in place with place; on failure the temporary file is removed.
func write(path string, data []byte, perm os.FileMode, place func(tmp, path string) error) (err error) {
	dir := dirOf(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := place(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func dirOf(path string) string {
	if dir, _ := filepath.Split(path); dir != "" {
		return dir
	}
	return "."
}
