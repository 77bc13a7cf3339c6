package updater

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The checkout lock: a kernel lock the updater holds on the checkout it
// updates for the whole of its process tree (the children it starts
// inherit it), so that two updates of one checkout exclude each other
// whatever their homes, and an update whose owner was killed is not over
// while a child it started still runs. On Unix it is flock(2) on the whole
// file; on Windows a byte-range lock of the byte at CheckoutLockOffset, and
// each process that joins its ancestor's lock holds one of the
// CheckoutLeaseBytes after it. The file's bytes are the last holder's
// record (a marker body) and prove nothing: only the kernel lock counts.
const (
	// HermesCheckoutLock is the Hermes updater's name of the lock in the
	// common Git directory; in an install root without .git it is
	// ".hermes-update.lock".
	HermesCheckoutLock = "hermes-update.lock"
	CheckoutLockOffset = 1 << 20
	CheckoutLeaseBytes = 16
	// CheckoutContentionWait is how long the updater retries a checkout
	// lock it found taken before it gives up: a probe holds it for an
	// instant, and the updater waits it out.
	CheckoutContentionWait = 3 * time.Second
)

// CheckoutLockPath is where the updater locks the checkout whose top-level
// directory (install root) is root, name being the lock's file name
// (HermesCheckoutLock): <common Git directory>/<name> where root/.git is a
// directory or a "gitdir: <path>" file (whose Git directory's commondir
// file may name the shared one), else root/.<name>. It is read from the
// files, as the updater reads it, without git.
func CheckoutLockPath(root, name string) string {
	if common, ok := gitCommonDir(root); ok {
		return filepath.Join(common, name)
	}
	return filepath.Join(root, "."+name)
}

// gitCommonDir reads root's common Git directory from root/.git, as the
// updater reads it: links followed (a .git, gitdir or commondir file that
// is a link is read where it leads), a .git that is neither a directory
// nor a regular file names none, and a commondir that is no regular file
// is not there.
func gitCommonDir(root string) (string, bool) {
	dot := filepath.Join(root, ".git")
	fi, err := os.Stat(dot)
	if err != nil || !fi.IsDir() && !fi.Mode().IsRegular() {
		return "", false
	}
	gitdir := dot
	if !fi.IsDir() {
		body, err := readSmallFollowing(dot)
		if err != nil {
			return "", false
		}
		text := strings.TrimSpace(strings.TrimPrefix(string(body), "\ufeff"))
		target, ok := strings.CutPrefix(text, "gitdir:")
		if !ok {
			return "", false
		}
		target = strings.TrimSpace(target)
		if !filepath.IsAbs(target) {
			target = filepath.Join(root, target)
		}
		gitdir = target
	}
	commondir := filepath.Join(gitdir, "commondir")
	if ci, err := os.Stat(commondir); err == nil && ci.Mode().IsRegular() {
		body, err := readSmallFollowing(commondir)
		if err != nil {
			return "", false
		}
		common := strings.TrimSpace(strings.TrimPrefix(string(body), "\ufeff"))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitdir, common)
		}
		gitdir = common
	}
	return filepath.Clean(gitdir), true
}

// readSmallFollowing reads a small regular file (a .git file, a commondir)
// where its links lead, without blocking: the links resolved first, the
// file they lead to opened as readSmall opens one.
func readSmallFollowing(path string) ([]byte, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	return readSmall(real)
}

// readSmall reads a small regular file (a .git file, a commondir) safely.
func readSmall(path string) ([]byte, error) {
	body, kind, why := SafeOpen(path, 64<<10)
	switch kind {
	case FileAbsent:
		return nil, fs.ErrNotExist
	case FileUnusable:
		return nil, errors.New(why)
	}
	return body, nil
}

// LockState is what a probe of the checkout lock found.
type LockState int

// The answers of a probe of the checkout lock.
const (
	LockFree    LockState = iota // no file, or no process holds it
	LockHeld                     // a process holds it, or its file cannot be opened
	LockUnknown                  // this platform cannot tell
)

// ProbeCheckoutLock reports whether a process holds the checkout lock at
// path, as the updater's own probe does: it takes the lock without
// waiting for the instant of one try and drops it at once. Only a missing
// file is free without a try; a file that exists and cannot be opened is
// held (so every reader parks what the updater's own would); a lock call
// that fails outright (a file system without locks) means nothing can
// hold it. why says what was found.
func ProbeCheckoutLock(path string) (state LockState, why string) {
	// One probe at a time in a process: probes that overlapped could keep
	// the lock taken long enough for a starting updater to give up.
	probeMu.Lock()
	defer probeMu.Unlock()
	f, err := openLockProbe(path)
	if errors.Is(err, fs.ErrNotExist) {
		return LockFree, "no lock file"
	}
	if err != nil {
		return LockHeld, "the lock file cannot be opened: " + err.Error()
	}
	defer f.Close()
	held, err := tryCheckoutLock(f)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return LockUnknown, "this platform cannot probe the lock"
	case err != nil:
		return LockFree, "the file system takes no lock: " + err.Error()
	case held:
		return LockHeld, "a process holds it"
	}
	unlockCheckout(f)
	return LockFree, "no process holds it"
}

// probeMu serializes the probes of this process.
var probeMu sync.Mutex

// ErrCheckoutLocked matches the error of LockCheckout when another
// process tree holds the checkout lock.
var ErrCheckoutLocked = errors.New("another update holds the checkout lock")

// LockCheckout takes the checkout lock at path for this process's update,
// as the updater takes it: the file opened (created) read-write, the lock
// tried every 20 ms for at most wait (a probe holds it for an instant),
// and the holder record (MarkerBody of this process) written into it. The
// lock lasts until the file is closed, and on Unix while any child that
// inherited the descriptor runs.
func LockCheckout(path string, wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		held, err := tryCheckoutLock(f)
		if err != nil {
			f.Close()
			return nil, &fs.PathError{Op: "lock", Path: path, Err: err}
		}
		if !held {
			break
		}
		if !time.Now().Before(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w: %s", ErrCheckoutLocked, path)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The try that found it free left it taken on f: record the holder
	// for readers that name it.
	pid := os.Getpid()
	record := markerBodyOf(pid, time.Now())
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(record, 0)
	}
	return f, nil
}

// CheckoutLockPaths are the checkout locks named name of the installs
// whose directories are roots: for each, the lock of the nearest directory at or
// above it that holds a .git (its checkout's top level), else the lock of
// the directory itself (an install without .git), once each.
func CheckoutLockPaths(roots []string, name string) []string {
	var paths []string
	for _, root := range roots {
		top := root
		for dir := root; ; {
			if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
				top = dir
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
		if p := CheckoutLockPath(top, name); !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return paths
}
