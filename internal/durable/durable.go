// Package durable replaces files atomically and durably: a reader sees the
// old content or the new, never a mix, and once WriteFile returns the new
// content survives a crash (the file and the rename are flushed to disk).
package durable

import (
	"os"
	"path/filepath"
)

// WriteFile replaces the file at path with data: a temporary file in the
// same directory is written, flushed (fsync), closed and renamed over
// path, and then the directory is flushed so that the rename itself
// survives a crash. On failure the temporary file is removed and path is
// left as it was.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
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
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}
