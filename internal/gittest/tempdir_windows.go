//go:build windows

package gittest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/windows"
)

// TempDir is tb.TempDir with a cleanup that Wine can carry out: Go's
// os.RemoveAll deletes through calls Wine 8 does not implement ("Invalid
// function"), so the tree is removed with DeleteFile and RemoveDirectory,
// deepest first, clearing the read-only attribute where needed.
func TempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "runtimeguard-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeTree(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	return dir
}

func removeTree(root string) error {
	var dirs, files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Type()&os.ModeSymlink == 0 {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range files {
		p, err := windows.UTF16PtrFromString(f)
		if err != nil {
			return err
		}
		_ = windows.SetFileAttributes(p, windows.FILE_ATTRIBUTE_NORMAL)
		if err := windows.DeleteFile(p); err != nil {
			if err := windows.RemoveDirectory(p); err != nil { // a directory link
				return &os.PathError{Op: "delete", Path: f, Err: err}
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		p, err := windows.UTF16PtrFromString(dirs[i])
		if err != nil {
			return err
		}
		if err := windows.RemoveDirectory(p); err != nil {
			return &os.PathError{Op: "rmdir", Path: dirs[i], Err: err}
		}
	}
	return nil
}
