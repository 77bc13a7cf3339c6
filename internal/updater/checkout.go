package updater

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

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
// where a writer takes it and a reader probes it, and Also, where the
// updater's own reader puts the lock of the same checkout instead, where
// its rule and git's differ: a reader probes it too, no writer here takes
// it; "" where it is Path.
type CheckoutLockPaths struct {
	Path, Also string
}

// FindCheckoutLock is where the checkout lock named name (the layout's
// CheckoutLock, Hermes's HermesCheckoutLock) of the install whose root is
// root (absolute) is: <common Git directory>/<name> of the repository
// git's discovery finds from root (gitread.Locate: gitdir files,
// commondir, core.worktree, a .git git passes over), else, where no
// repository holds root, <root>/.<name>. Where the updater's own reader,
// which reads only <top level>/.git, finds no .git there (a core.worktree
// set in a Git directory elsewhere), it locks <top level>/.<name>:
// that is Also. A repository git cannot read is an error: no path is
// known.
func FindCheckoutLock(root, name string) (CheckoutLockPaths, error) {
	l, err := gitread.Locate(root)
	if err != nil {
		return CheckoutLockPaths{}, err
	}
	if l.CommonDir == "" {
		return CheckoutLockPaths{Path: filepath.Join(root, "."+name)}, nil
	}
	p := CheckoutLockPaths{Path: filepath.Join(l.CommonDir, name)}
	if l.DotGit != filepath.Join(l.TopLevel, ".git") {
		p.Also = filepath.Join(l.TopLevel, "."+name)
	}
	return p, nil
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
