package updater

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
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

// CheckoutLockPaths are where the checkout lock of one install is: Path,
// where a writer takes it and a reader probes it (never through a link at
// its name), and Also, where Hermes's own updater takes the lock of the
// same install instead (HermesLockPath), where that is another file: a
// reader probes it too, through links as the updater opens it, and no
// writer here takes it; "" where it is Path's file.
type CheckoutLockPaths struct {
	Path, Also string
}

// FindCheckoutLock is where the checkout lock named name (the layout's
// CheckoutLock, Hermes's HermesCheckoutLock) of the install whose root is
// root (absolute) is: <common Git directory>/<name> of the repository
// git's discovery finds from root (gitread.Locate: gitdir files,
// commondir, core.worktree, a .git git passes over), else, where no
// repository holds root, <root>/.<name>; and Also, Hermes's own path
// (HermesLockPath) where it names another file. A repository git cannot
// find is an error, with Also alone; one whose config cannot be read has
// its lock in the common Git directory found.
func FindCheckoutLock(root, name string) (CheckoutLockPaths, error) {
	var p CheckoutLockPaths
	l, err := gitread.Locate(root)
	switch {
	case err != nil && l.CommonDir == "":
	case l.CommonDir == "":
		p.Path = filepath.Join(root, "."+name)
	default:
		p.Path = filepath.Join(l.CommonDir, name)
	}
	if hermes := HermesLockPath(root, name); !sameFile(hermes, p.Path) {
		p.Also = hermes
	}
	if p.Path == "" {
		return p, err
	}
	return p, nil
}

// sameFile reports whether the paths a and b name one file: the same
// text, or the same name in one directory (by the directory's identity,
// links followed).
func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	if b == "" || filepath.Base(a) != filepath.Base(b) {
		return false
	}
	da, err := os.Stat(filepath.Dir(a))
	if err != nil {
		return false
	}
	db, err := os.Stat(filepath.Dir(b))
	return err == nil && os.SameFile(da, db)
}

// maxDotGitBytes bounds the read of a .git file or a commondir file by
// HermesLockPath: a path, of at most a few kilobytes.
const maxDotGitBytes = 64 << 10

// HermesLockPath is where Hermes's own updater takes the checkout lock
// named name of the install whose root is root, by its rule
// (hermes_cli/update_lock.py _git_common_dir and checkout_lock_path):
// only <root>/.git is read, links followed; a directory there is the Git
// directory; a regular file there whose text (UTF-8, a BOM dropped,
// stripped of Python's whitespace) starts with "gitdir:" names it, the
// rest of the text joined to root by text (an absolute one replaces
// root); where <Git directory>/commondir is a regular file its text is
// joined to the Git directory likewise; the result is cleaned by text
// (os.path.normpath: a ".." after a link is not the link target's
// parent), and the lock is <that directory>/<name>. Anything else (no
// .git, another file type, a text that names no gitdir, a read that
// fails) is an install without Git: <root>/.<name>. Nothing but a regular
// file is opened.
func HermesLockPath(root, name string) string {
	none := filepath.Join(root, "."+name)
	dot := filepath.Join(root, ".git")
	fi, err := os.Stat(dot)
	if err != nil {
		return none
	}
	gitdir := dot
	switch {
	case fi.IsDir():
	case fi.Mode().IsRegular():
		text, ok := pyReadText(dot)
		rest, found := strings.CutPrefix(text, "gitdir:")
		if !ok || !found {
			return none
		}
		gitdir = joinText(root, pyStrip(rest))
	default:
		return none
	}
	common := gitdir + string(filepath.Separator) + "commondir"
	if fi, err := os.Stat(common); err == nil && fi.Mode().IsRegular() {
		text, ok := pyReadText(common)
		if !ok {
			return none
		}
		gitdir = joinText(gitdir, text)
	}
	return filepath.Join(filepath.Clean(gitdir), name)
}

// joinText joins rel to dir as Python's pathlib does, by text: an
// absolute rel replaces dir, and nothing is cleaned (a ".." stays, for
// the file system to resolve).
func joinText(dir, rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	if rel == "" {
		return dir
	}
	return dir + string(filepath.Separator) + rel
}

// pyReadText is the text of the regular file at path as Hermes's
// updater reads it (read_text(encoding="utf-8-sig").strip()): UTF-8, a BOM
// dropped, line ends made "\n", stripped of Python's whitespace; ok false
// where it cannot be read, or is not UTF-8.
func pyReadText(path string) (string, bool) {
	data, _, err := fsread.ReadRegular(path, maxDotGitBytes, false)
	if err != nil || !utf8.Valid(data) {
		return "", false
	}
	text := strings.TrimPrefix(string(data), "\ufeff")
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	return pyStrip(text), true
}

// pyStrip is s stripped of what Python's str.strip() strips: whitespace
// to str.isspace, \x1c to \x1f included.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		if r < 0x80 {
			return strings.ContainsRune(" \t\n\v\f\r\x1c\x1d\x1e\x1f", r)
		}
		return pyIsSpace(r)
	})
}

// regularOnly returns f, a lock file just opened, where it is a regular
// file (asked of the descriptor); anything else is closed and refused
// with an error matching fsread.ErrNotRegular.
func regularOnly(f *os.File) (*os.File, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: f.Name(), Err: &fsread.TypeError{Kind: fsread.TypeName(fi.Mode())}}
	}
	return f, nil
}

// LockState is what a probe of the checkout lock found.
type LockState int

// The answers of a probe of the checkout lock.
const (
	LockFree    LockState = iota // no file, or no process holds it
	LockHeld                     // a process holds it, or its file cannot be opened
	LockUnknown                  // this platform cannot tell, or what is at the path proves nothing
)

// ProbeCheckoutLock reports whether a process holds the checkout lock at
// path, as the updater's own probe does: it takes the lock without
// waiting for the instant of one try and drops it at once. What is at the
// path is asked first (lstat; stat where follow), and only a regular file
// is opened: for reading (where the platform's lock takes that), never
// created, and, unless follow, never through a link at its name. A link
// there (unless follow), or anything but a regular file, is not opened
// and proves nothing: the lock is unknown. follow is for a path where the
// updater itself opens through links (see CheckoutLockPaths.Also). Only a
// missing file (or one below a file, where none can be) is free without a
// try; a file that exists and cannot be asked or opened is held (so every
// reader parks what the updater's own would); a lock call that fails
// outright (a file system without locks) means nothing can hold it. why
// says what was found and done.
//
// The tries of one path in this process never overlap (overlapping probes
// could keep the lock taken long enough for a starting updater to give
// up); nothing is held across the open, so a lock file that does not
// answer holds up no probe but its own path's.
func ProbeCheckoutLock(path string, follow bool) (state LockState, why string) {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	fi, err := stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return LockFree, "no lock file"
	case errors.Is(err, syscall.ENOTDIR):
		// A file on the way: no file can be there, nor be locked.
		return LockFree, "no lock file can be there: " + err.Error()
	case err != nil:
		return LockHeld, "the lock file cannot be asked: " + err.Error()
	case !fi.Mode().IsRegular():
		at := "at its name"
		if follow {
			at = "at its name, or where a link there leads"
		}
		return LockUnknown, "a " + fsread.TypeName(fi.Mode()) + " is " + at + ", not a regular file: not opened, it proves nothing"
	}
	f, err := openLock(nil, path, false, exclusiveWrites, follow)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return LockFree, "no lock file"
	case errors.Is(err, syscall.ENOTDIR):
		return LockFree, "no lock file can be there: " + err.Error()
	case err != nil && (isLink(err) || errors.Is(err, fsread.ErrNotRegular)):
		return LockUnknown, "replaced by another file type as it was opened: it proves nothing: " + err.Error()
	case err != nil:
		return LockHeld, "the lock file cannot be opened: " + err.Error()
	}
	defer f.Close()
	if opened, err := f.Stat(); err != nil || !os.SameFile(fi, opened) {
		return LockUnknown, "replaced as it was opened: it proves nothing"
	}
	unlock := probes.lock(path)
	defer unlock()
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

// probes serializes the tries of each lock path in this process.
var probes pathLocks

// pathLocks are mutexes by path, each kept while a holder or a waiter
// uses it. mu is held only to find or drop one, never across a file
// system call.
type pathLocks struct {
	mu sync.Mutex // protects m
	m  map[string]*pathLock
}

type pathLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; pathLocks.mu protects it
}

// lock takes the mutex of path and returns its release.
func (p *pathLocks) lock(path string) func() {
	p.mu.Lock()
	if p.m == nil {
		p.m = make(map[string]*pathLock)
	}
	l := p.m[path]
	if l == nil {
		l = new(pathLock)
		p.m[path] = l
	}
	l.refs++
	p.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		p.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(p.m, path)
		}
		p.mu.Unlock()
	}
}

// ErrCheckoutLocked matches the error of LockCheckout when another
// process tree holds the checkout lock.
var ErrCheckoutLocked = errors.New("another update holds the checkout lock")

// LockCheckout takes the checkout lock at path for this process's update,
// as the updater takes it: the file opened (created where missing) for
// reading and writing, or for reading alone where its permissions allow
// no more (a lock file left by another user: the kernel lock takes a
// read-only descriptor, but on AIX), never through a link at its name and
// never anything but a regular file; the lock tried every 20 ms for at
// most wait (a probe holds it for an instant); and, where the file is
// writable, the holder record (MarkerBody of this process) written into
// it. The lock lasts until the file is closed, and on Unix while any child
// that inherited the descriptor runs.
func LockCheckout(path string, wait time.Duration) (*os.File, error) {
	f, err := openLock(nil, path, true, true, false)
	writable := err == nil
	if denied(err) && !exclusiveWrites {
		f, err = openLock(nil, path, false, false, false)
	}
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
	// for readers that name it, in the file opened (no link followed).
	if writable {
		record := markerBodyOf(os.Getpid(), time.Now())
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt(record, 0)
		}
	}
	return f, nil
}

// CheckoutID is the identity of the directory dir (links followed): its
// device and inode, its volume and file ID on Windows (fsread.FileID).
// Another name of the same directory (a bind mount, another case on a
// case-insensitive file system, a ".." in the path) has the same one; a
// directory renamed into its path has another.
func CheckoutID(dir string) (string, error) { return fsread.DirID(dir) }
