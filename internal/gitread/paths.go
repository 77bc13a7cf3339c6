package gitread

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// Module paths: made absolute, and resolved link by link.

// Abs makes a configured module path absolute. On Unix it is not cleaned:
// a ".." after a symbolic link leads to the parent of the link's target,
// as the kernel (and the interpreter that loads the module) resolves it,
// not to the directory the link is in; the resolution, link by link, does
// the rest. On Windows, where the system itself removes ".." from a path
// before it follows anything, it is cleaned.
func Abs(modulePath string) (string, error) {
	if modulePath == "" {
		return "", errors.New("empty module path")
	}
	if runtime.GOOS == "windows" {
		abs, err := filepath.Abs(modulePath)
		if err != nil {
			return "", fmt.Errorf("module path: %w", err)
		}
		return abs, nil
	}
	if filepath.IsAbs(modulePath) {
		return modulePath, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("module path: %w", err)
	}
	return wd + string(filepath.Separator) + modulePath, nil
}

// ResolvePath makes a path absolute (see Abs) with links resolved; a
// missing final element is kept as it is, so a deleted module still names
// its place.
func ResolvePath(p string) (string, error) {
	abs, err := Abs(p)
	if err != nil {
		return "", err
	}
	r := reader{fs: System}
	resolved, _, err := r.resolve(abs)
	if err != nil {
		return "", err
	}
	return resolved, nil
}

// resolve follows every symbolic link of the absolute path p, component by
// component as the kernel does (see walk), and records each link it
// passes: a link re-pointed later changes the answer. A missing final
// component is kept as it is (exists is false); a missing directory on
// the way is an error.
func (r *reader) resolve(p string) (resolved string, exists bool, err error) {
	w, err := r.walk(p, func(link string, st fsread.Stamp) { r.addDep(link, true, st) })
	if err != nil {
		return "", false, err
	}
	more := trimSeparators(w.rest) != ""
	switch w.end {
	case walkMissing:
		if more {
			return "", false, &fs.PathError{Op: "resolve", Path: w.at, Err: fs.ErrNotExist}
		}
		return w.at, false, nil
	case walkNotDir:
		return "", false, &fs.PathError{Op: "resolve", Path: w.at, Err: errNotDir}
	case walkLoop:
		return "", false, &fs.PathError{Op: "resolve", Path: p, Err: errLinkLoop}
	}
	return w.resolved, true, nil
}

// cutComponent splits the first path component off p.
func cutComponent(p string) (comp, rest string) {
	p = strings.TrimLeft(p, string(filepath.Separator))
	if i := strings.IndexByte(p, filepath.Separator); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}
