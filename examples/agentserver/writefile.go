package main

import (
	"os"
	"path/filepath"
	"runtime"
)

// writeFileDurably replaces the file at path with data, so that a crash
// leaves the old file or the new one: a temporary file in the same
// directory is written, flushed, closed and renamed over path, then the
// directory is flushed so that the rename survives too (where the system
// can flush a directory: not on Windows, whose rename is durable once it
// returns). On failure path is left as it was.
func writeFileDurably(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
