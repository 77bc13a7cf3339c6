package runtimeguard

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// binding is one bound checkout and the proof, kept between checks, that its
// files did not change.
type binding struct {
	id Identity
	// reason says why id.Revision is empty, for an inert binding.
	reason string
	// boundAt is when the binding's first read began: a receipt must have
	// finished after it to allow a reload.
	boundAt time.Time
	// receiptsAt stamps the updater's receipt files as they were before
	// the binding's first read (nil where the layout has none): only a
	// receipt written since, in a file not in it or changed, can allow a
	// reload, whatever time the receipt claims.
	receiptsAt *updater.ReceiptFiles
	// sig is closed once a check finds the binding stale; replaced once
	// the guard binds anew.
	sig, replaced *signal
	// configured is the module path as configured, absolute (see
	// gitread.Abs: on Unix, not cleaned) with its links unresolved: every
	// full read resolves it again, and a path that now leads to another
	// module file makes the runtime stale.
	configured string

	snap atomic.Pointer[snapshot]

	// sub is the binding's inotify subscription, on the watch path; nil
	// on the stat path, and watchWhy then says why (for diagnostics).
	sub      atomic.Pointer[watch.Sub]
	watchWhy atomic.Pointer[string]

	mu       sync.Mutex // protects started, inflight and last
	started  uint64     // full reads started so far
	inflight *readCall  // the full read running, if any
	last     *readCall  // the latest full read that returned
}

// snapshot is the result of a full read with the stamps of every file it
// depends on. trusted is false when a stamp could hide a later change.
// watched is true when the binding's inotify subscription, armed for these
// files in generation gen, proves them unchanged: the watch path.
type snapshot struct {
	rev     string
	deps    gitread.Deps
	trusted bool
	watched bool
	sub     *watch.Sub // the subscription that vouches, when watched
	gen     uint64
}

// readCall is one full read: done is closed once its results are set.
type readCall struct {
	seq      uint64
	start    time.Time
	done     chan struct{}
	rev      string
	err      error
	checkout gitread.Checkout
	snap     *snapshot // nil unless the read succeeded
}

// current returns the checkout's revision now: from the snapshot when the
// watch proves nothing changed (one system call), or a stat of each of its
// files does, else from a full read.
func (b *binding) current(e *env, alwaysRead bool, timeout time.Duration) (string, error) {
	if s := b.snap.Load(); s != nil && !alwaysRead {
		switch {
		case s.watched:
			if s.sub.Unchanged(s.gen) || s.sub.Settle(s.gen) {
				return s.rev, nil
			}
		case s.trusted && s.deps.Unchanged(e.git):
			return s.rev, nil
		}
	}
	call, err := b.fullRead(e, alwaysRead, timeout, false)
	if err != nil {
		return "", err
	}
	return call.rev, call.err
}

// fullRead returns a full read that began after the caller arrived: the
// one in flight if it began later, else a new one. At most one read per
// binding is in flight: a caller that finds an older read running waits
// for it, then starts the next. Reads run on their own goroutine, and no
// caller waits longer than timeout: a read that never returns (a hung file
// system) costs one goroutine, and every check meanwhile fails closed.
func (b *binding) fullRead(e *env, alwaysRead bool, timeout time.Duration, mustExist bool) (*readCall, error) {
	var timer *time.Timer
	b.mu.Lock()
	arrival := b.started
	for {
		if b.last != nil && b.last.seq > arrival {
			call := b.last
			b.mu.Unlock()
			return call, nil
		}
		call := b.inflight
		if call == nil {
			b.started++
			call = &readCall{seq: b.started, start: time.Now(), done: make(chan struct{})}
			b.inflight = call
			go b.run(call, e, alwaysRead, mustExist)
		} else if since := time.Since(call.start); since > timeout {
			b.mu.Unlock()
			return nil, fmt.Errorf("a read of %s has not returned in %v: %w", b.configured, since.Round(time.Millisecond), ErrReadTimeout)
		}
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(timeout)
			defer timer.Stop()
		}
		select {
		case <-call.done:
		case <-timer.C:
			return nil, fmt.Errorf("a read of %s did not return within %v: %w", b.configured, timeout, ErrReadTimeout)
		}
		b.mu.Lock()
	}
}

// run performs one full read, publishes its snapshot and hands its result
// to the waiting callers. A panic in the read becomes a *[PanicError]: the
// runtime is then stale, and the host lives on.
//
// The previous snapshot stays published while the read runs: it remains a
// valid proof for any check whose stats still match it.
func (b *binding) run(call *readCall, e *env, alwaysRead, mustExist bool) {
	defer func() {
		if p := recover(); p != nil {
			call.rev, call.snap = "", nil
			call.err = &PanicError{Value: p, Stack: debug.Stack()}
		}
		b.mu.Lock()
		b.last, b.inflight = call, nil
		b.mu.Unlock()
		close(call.done)
	}()
	start := e.now()
	gen := b.armable(e, alwaysRead)
	c, deps, err := gitread.Read(e.git, b.configured, mustExist)
	call.checkout = c
	switch {
	case err != nil:
		call.err = err
		return
	case b.id.ModulePath != "" && c.ModulePath != b.id.ModulePath:
		call.err = fmt.Errorf("%s now leads to %s, not to %s: %w", b.configured, c.ModulePath, b.id.ModulePath, errElsewhere)
		return
	}
	s := &snapshot{rev: c.Revision, deps: deps, trusted: !alwaysRead && deps.Settled(start), gen: gen}
	if sub := b.sub.Load(); sub != nil {
		s.watched, s.sub = b.arm(e, sub, s, start), sub
	}
	b.snap.Store(s)
	call.rev, call.snap = c.Revision, s
}

// installDirs are the source directories whose recovery markers count:
// the bound one and, where the configured path now leads to another
// directory (a deploy flipped a link), that one, whose code a reload
// would load.
func (b *binding) installDirs() []string {
	dirs := []string{b.id.SourceDir}
	if b.configured == "" {
		return dirs
	}
	if mod, err := gitread.ResolvePath(b.configured); err == nil && filepath.Dir(mod) != b.id.SourceDir {
		dirs = append(dirs, filepath.Dir(mod))
	}
	return dirs
}

// errElsewhere is a configured module path that now leads to another file
// than the one the guard bound to.
var errElsewhere = errors.New("the module path leads elsewhere")

// armable prepares a full read on the watch path: it subscribes the
// binding on its first read, where the platform has inotify, and starts a
// new generation, so that every change from here on is seen. It returns
// the generation; on the stat path, 0.
func (b *binding) armable(e *env, alwaysRead bool) uint64 {
	if alwaysRead {
		return 0
	}
	sub := b.sub.Load()
	if sub == nil {
		if b.watchWhy.Load() != nil {
			return 0 // tried, and the stat path it is
		}
		w, err := e.watch()
		if err != nil {
			b.setWatchWhy(err.Error())
			return 0
		}
		sub = w.Subscribe()
		if !b.sub.CompareAndSwap(nil, sub) {
			sub.Close()
			return 0
		}
		runtime.AddCleanup(b, func(s *watch.Sub) { s.Close() }, sub)
	}
	return sub.Clear()
}

// arm watches what the snapshot depends on and reports whether the watch
// may vouch for it. Where a directory is watched that was not before, a
// change between the read and now went unreported: the files must be
// settled and unchanged, else the next check reads again. A file system
// that does not report its changes, or the watch limit, keeps the stat
// path, and says why.
func (b *binding) arm(e *env, sub *watch.Sub, s *snapshot, start time.Time) bool {
	entries := make([]watch.Entry, len(s.deps))
	for i, d := range s.deps {
		file := d.Stamp.Present() && !d.Stamp.IsDir() && !(d.NoFollow && d.Stamp.IsLink())
		entries[i] = watch.Entry{Path: d.Path, Dir: d.NoFollow && d.Stamp.IsDir(), File: file}
	}
	fresh, err := sub.Arm(entries)
	if err != nil {
		b.setWatchWhy(err.Error())
		if b.sub.CompareAndSwap(sub, nil) {
			sub.Close()
		}
		return false
	}
	if fresh && !(s.deps.Settled(start) && s.deps.Unchanged(e.git)) {
		sub.MarkDirty()
	}
	return true
}

func (b *binding) setWatchWhy(why string) { b.watchWhy.Store(&why) }

// path says how a check of the unchanged checkout proves it unchanged,
// and why not by watching.
func (b *binding) path(alwaysRead bool) (check, why string) {
	if alwaysRead {
		return "read", "Options.AlwaysRead"
	}
	if s := b.snap.Load(); s != nil && s.watched {
		return "watch", ""
	}
	if w := b.watchWhy.Load(); w != nil {
		why = *w
	}
	return "stat", why
}

// close drops the binding's subscription: a binding no guard uses. A
// read still in flight finds it closed.
func (b *binding) close() {
	if sub := b.sub.Swap(nil); sub != nil {
		sub.Close()
	}
}
