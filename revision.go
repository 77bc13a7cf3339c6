package runtimeguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/check"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
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
	// failed is the latest full read's failure, when what decided it is
	// the content of files it depends on, settled: while a stat of each
	// finds them unchanged, it is the answer, and nothing is read again
	// (a sparse index of 256 MiB is not read whole on every check).
	failed atomic.Pointer[failure]

	// sub is the binding's inotify subscription, on the watch path; nil
	// on the stat path, and watchWhy then says why (for diagnostics). A
	// binding whose arming failed subscribes again on its next full read,
	// unless watchOff (no watcher in this process, or Options.Check "stat") or
	// closed (the guard no longer uses it, or was closed).
	sub      *subRef
	watchWhy atomic.Pointer[string]
	watchOff atomic.Bool
	closed   atomic.Bool
	// guardClosed is the guard's: set by Guard.Close.
	guardClosed *atomic.Bool
	// pathSig fires, and is replaced, whenever checks of the unchanged
	// checkout change path (watch or stat): a Guard.Watch picks its event
	// source again.
	pathSig atomic.Pointer[signal]
	cleanup sync.Once // registers the closing of sub with the collector
	// readModule is the module file the configured path led to at the
	// latest full read, when it succeeded (links resolved): see
	// installDirs.
	readModule atomic.Pointer[string]

	// x is the guard's executor, which runs every look at the checkout
	// and read of the updater's files; looks is the lane of the binding's
	// looks (the stats of the stat path, full reads), obs of the reads of
	// a stale answer, diag of a diagnostic's (Guard.Observe), which reads
	// the receipts too.
	x     *check.Executor
	looks check.Lane[readResult]
	obs   check.Lane[Observation]
	diag  check.Lane[Observation]
	// counts are the guard's, counting full reads and timeouts; nil for
	// none.
	counts *counters
}

// failure is a full read's failure and the files that decided it.
type failure struct {
	deps gitread.Deps
	err  error
}

// subRef holds a binding's subscription apart from the binding, so that
// the garbage collector can close it once the binding is unreachable.
type subRef struct{ atomic.Pointer[watch.Sub] }

// newBinding returns a binding of the configured path abs that has read
// nothing yet.
func newBinding(x *check.Executor, abs string, boundAt time.Time, guardClosed *atomic.Bool) *binding {
	return &binding{x: x, configured: abs, boundAt: boundAt, sig: newSignal(), replaced: newSignal(), sub: new(subRef), guardClosed: guardClosed}
}

// snapshot is the result of a full read with the stamps of every file it
// depends on. trusted is false when a stamp could hide a later change.
// claim, when the binding's inotify subscription was armed for these files
// by the read, proves them unchanged: the watch path; nil on the stat
// path.
type snapshot struct {
	rev     string
	deps    gitread.Deps
	trusted bool
	claim   *watch.Read
	// noRev is why rev is empty (matching ErrNotCheckout); nil otherwise.
	noRev error
	// index is the read's answer of the index, when its stamp was settled
	// as the read began: the next read takes it again where a stat finds
	// the index unchanged, and does not read it.
	index *gitread.Index
}

// readResult is what one look at the checkout found: the revision, or
// why there is none.
type readResult struct {
	rev      string
	err      error
	checkout gitread.Checkout
	snap     *snapshot // nil unless the read succeeded
	// unchanged, for a binding's first read, is true when a stat of every
	// file it depended on, after it returned, found it unchanged.
	unchanged bool
}

// readCall is one look at the checkout: a stat of each file the snapshot
// depends on, or a full read.
type readCall = check.Task[readResult]

// current returns the checkout's revision now: from the snapshot when the
// watch proves nothing changed (one system call, in the caller's
// goroutine: it cannot block), or a stat of each of its files does, else
// from a full read. Stats and reads run on a goroutine of their own: see
// look.
//
// A check whose snapshot's read was overtaken by a read that began
// meanwhile (another check found a change, or its own poll was not sure)
// waits for that read and asks again of its snapshot: a read not
// overtaken answers for now, whenever it began, since every change after
// it began is reported. So the checks in flight around one read of a herd
// start no read each after it.
//
// The waits for those reads and the check's own look share one timeout:
// no check waits longer than timeout for the checkout in all.
func (b *binding) current(e *env, alwaysRead bool, timeout time.Duration) (string, error) {
	var since time.Time // when the first wait for a read began
	waited := false
	for retry := 0; !alwaysRead; retry++ {
		s := b.snap.Load()
		if s == nil || s.claim == nil {
			break
		}
		if s.claim.Unchanged() || s.claim.Recheck() {
			return s.rev, s.noRev
		}
		if retry == maxOvertaken || !s.claim.Overtaken() {
			break
		}
		if !waited {
			since, waited = time.Now(), true
		}
		if !check.Await(b.x, &b.looks, timeout-time.Since(since)) {
			break
		}
	}
	if waited {
		left := timeout - time.Since(since)
		if left <= 0 {
			b.countTimeout()
			return "", classed(ErrReadTimeout, "the reads of %s a check waited for took its whole %v: %s", b.configured, timeout, classWords(ErrReadTimeout))
		}
		timeout = left
	}
	call, err := b.look(context.Background(), e, alwaysRead, timeout, false)
	if err != nil {
		return "", err
	}
	if r := &call.Val; r.err == nil && r.snap != nil {
		return r.rev, r.snap.noRev
	}
	return call.Val.rev, call.Val.err
}

// maxOvertaken bounds the reads a check waits for, each of which began
// after its snapshot's, before it starts one of its own.
const maxOvertaken = 2

// look returns a look at the checkout that began after the caller
// arrived: one queued on the binding's lane and not yet begun, else a new
// one. Looks run on the guard's executor, and no caller waits longer than
// timeout, or past ctx: a stat or read that never returns (a hung file
// system) costs one goroutine, and every check meanwhile fails closed,
// naming what it is blocked on.
//
// A look first stats the files of a trusted snapshot of the stat path,
// unless mustExist (a first read) or alwaysRead; where they are
// unchanged it answers with the snapshot, else it reads the checkout.
func (b *binding) look(ctx context.Context, e *env, alwaysRead bool, timeout time.Duration, mustExist bool) (*readCall, error) {
	l := &b.looks
	if mustExist {
		l = nil // a bind's read is its own
	}
	call, stuck := check.Submit(ctx, b.x, l, timeout, func(c *readCall) { b.run(c, e, alwaysRead, mustExist) }, nil)
	if stuck == nil {
		if call.Err != nil {
			return nil, pieceErr(call.Err)
		}
		return call, nil
	}
	if stuck.Ctx != nil {
		return nil, stuck.Ctx
	}
	b.countTimeout()
	on := ""
	if stuck.At != "" {
		on = ", blocked on " + stuck.At
	}
	if stuck.Before {
		return nil, classed(ErrReadTimeout, "a look at %s has not returned in %v%s: %s", b.configured, stuck.Since.Round(time.Millisecond), on, classWords(ErrReadTimeout))
	}
	return nil, classed(ErrReadTimeout, "a look at %s did not return within %v%s: %s", b.configured, stuck.Since, on, classWords(ErrReadTimeout))
}

// statsUnchanged stats each of deps and reports whether all still have
// their stamps; c names the one being statted.
func statsUnchanged(c *readCall, fs *gitread.FS, deps gitread.Deps) bool {
	for i := range deps {
		c.At.Store(&deps[i].Path)
		if !deps[i].Unchanged(fs) {
			return false
		}
	}
	return true
}

// tracking is fs with every call naming its path in at first.
func tracking(fs *gitread.FS, at *atomic.Pointer[string]) *gitread.FS {
	t := &gitread.FS{
		Stat: func(p string) (fsread.Stamp, error) {
			at.Store(&p)
			return fs.Stat(p)
		},
		Lstat: func(p string) (fsread.Stamp, error) {
			at.Store(&p)
			return fs.Lstat(p)
		},
		ReadFile: func(p string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
			at.Store(&p)
			return fs.ReadFile(p, limit, nofollow)
		},
	}
	if fs.Open != nil {
		t.Open = func(p string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
			at.Store(&p)
			return fs.Open(p, limit, nofollow)
		}
	}
	if fs.ReadEnds != nil {
		t.ReadEnds = func(p string, n int, nofollow bool) ([]byte, []byte, fsread.Stamp, error) {
			at.Store(&p)
			return fs.ReadEnds(p, n, nofollow)
		}
	}
	return t
}

// arming is what a read is on while it adds its inotify watches.
var arming = "the inotify watches of its files"

// run performs one full read, publishes its snapshot and hands its result
// to the waiting callers. A panic in the read becomes a *[PanicError]: the
// runtime is then stale, and the host lives on.
//
// The previous snapshot stays published while the read runs: it remains a
// valid proof for any check whose stats still match it.
func (b *binding) run(call *readCall, e *env, alwaysRead, mustExist bool) {
	r := &call.Val
	defer func() {
		if p := recover(); p != nil {
			r.rev, r.snap = "", nil
			r.err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	if s := b.snap.Load(); s != nil && !alwaysRead && !mustExist && s.claim == nil && s.trusted && statsUnchanged(call, e.git, s.deps) {
		r.rev, r.snap = s.rev, s
		return
	}
	if f := b.failed.Load(); f != nil && !alwaysRead && !mustExist && statsUnchanged(call, e.git, f.deps) {
		r.err = f.err // the same files: the same failure, not read again
		return
	}
	start := e.now()
	claim, watching := b.armable(e, alwaysRead)
	fsys := tracking(e.git, &call.At)
	b.countRead()
	var prevIndex *gitread.Index
	if s := b.snap.Load(); s != nil && !alwaysRead && !mustExist {
		prevIndex = s.index
	}
	c, deps, routes, index, err := gitread.ReadWith(fsys, b.configured, mustExist, prevIndex, watching)
	r.checkout = c
	if err == nil {
		b.readModule.Store(&c.ModulePath)
	} else {
		b.readModule.Store(nil)
	}
	switch {
	case err != nil:
		r.err = err
		if !alwaysRead && gitread.FromContent(err) && deps.Settled(start) {
			b.failed.Store(&failure{deps: deps, err: err})
		}
		return
	case b.id.ModulePath != "" && c.ModulePath != b.id.ModulePath:
		r.err = fmt.Errorf("%s now leads to %s, not to %s: %w", b.configured, c.ModulePath, b.id.ModulePath, errElsewhere)
		return
	}
	s := &snapshot{rev: c.Revision, deps: deps, trusted: !alwaysRead && deps.Settled(start)}
	if index != nil && !alwaysRead && index.Settled(start) {
		s.index = index
	}
	if c.Revision == "" {
		s.noRev = noRevision(c.Reason)
	}
	if watching && b.sub.Load() == claim.Sub() {
		call.At.Store(&arming)
		if b.arm(fsys, claim.Sub(), deps, routes, start) {
			s.claim = &claim
		}
	}
	if mustExist {
		r.unchanged = deps.Unchanged(fsys)
	}
	b.failed.Store(nil)
	if prev := b.snap.Swap(s); prev == nil || (prev.claim != nil) != (s.claim != nil) {
		b.pathChanged()
	}
	r.rev, r.snap = c.Revision, s
}

// pathSignal is the signal that fires when checks change path next.
func (b *binding) pathSignal() *signal {
	if s := b.pathSig.Load(); s != nil {
		return s
	}
	b.pathSig.CompareAndSwap(nil, newSignal())
	return b.pathSig.Load()
}

// pathChanged fires the path signal and makes a new one.
func (b *binding) pathChanged() {
	if old := b.pathSig.Swap(newSignal()); old != nil {
		old.fire()
	}
}

// unused reports whether the binding may no longer watch: its guard no
// longer uses it, or was closed.
func (b *binding) unused() bool {
	return b.closed.Load() || b.guardClosed != nil && b.guardClosed.Load()
}

// installDirs are the source directories whose recovery markers count:
// the bound one and, where the configured path now leads to another
// directory (a deploy flipped a link), that one, whose code a reload
// would load.
//
// Where the latest full read succeeded, the directory it resolved the
// configured path to is the one: every check looks at the checkout first,
// and reads it again once anything on the way to the module changed. Else
// the path is resolved again.
func (b *binding) installDirs() []string {
	if b.configured == "" {
		return []string{b.id.SourceDir}
	}
	dirs := []string{b.id.SourceDir}
	mod, err := "", error(nil)
	if m := b.readModule.Load(); m != nil {
		mod = *m
	} else if mod, err = gitread.ResolvePath(b.configured); err != nil {
		return dirs
	}
	if filepath.Dir(mod) != b.id.SourceDir {
		dirs = append(dirs, filepath.Dir(mod))
	}
	return dirs
}

// errElsewhere is a configured module path that now leads to another file
// than the one the guard bound to.
var errElsewhere = errors.New("the module path leads elsewhere")

// armable prepares a full read on the watch path: it subscribes the
// binding, where the platform has inotify, on its first read and on every
// read after an arming failed (a file system that now reports its
// changes, a watch limit no longer reached), and begins the read on the
// subscription, so that every change from here on is seen. It returns the
// read's claim, and false on the stat path.
func (b *binding) armable(e *env, alwaysRead bool) (watch.Read, bool) {
	if alwaysRead || b.watchOff.Load() || b.unused() {
		return watch.Read{}, false
	}
	sub := b.sub.Load()
	if sub == nil {
		w, err := e.watch()
		if err != nil {
			b.watchOff.Store(true)
			b.setWatchWhy(err.Error())
			return watch.Read{}, false
		}
		sub = w.Subscribe()
		if !b.sub.CompareAndSwap(nil, sub) {
			sub.Close()
			return watch.Read{}, false
		}
		b.cleanup.Do(func() {
			runtime.AddCleanup(b, func(r *subRef) {
				if s := r.Swap(nil); s != nil {
					s.Close()
				}
			}, b.sub)
		})
		if b.unused() { // closed meanwhile
			b.close()
			return watch.Read{}, false
		}
	}
	return sub.Begin(), true
}

// arm watches what a read found its answer depends on, as it reached it,
// and reports whether the watch may vouch for it (see watch.Sub.Arm). A
// file system that does not report its changes, or the watch limit, keeps
// the stat path, and says why.
func (b *binding) arm(fsys *gitread.FS, sub *watch.Sub, deps gitread.Deps, routes []gitread.Route, start time.Time) bool {
	if err := sub.Arm(deps, routes, fsys, start); err != nil {
		b.setWatchWhy(err.Error())
		if b.sub.CompareAndSwap(sub, nil) {
			sub.Close()
		}
		return false
	}
	return true
}

func (b *binding) setWatchWhy(why string) { b.watchWhy.Store(&why) }

// The words of Options.Check and Observation.Check.
const (
	checkWatch = "watch"
	checkStat  = "stat"
	checkRead  = "read"
)

// path says how a check of the unchanged checkout proves it unchanged,
// and why not by watching.
func (b *binding) path(alwaysRead bool) (check, why string) {
	if alwaysRead {
		return checkRead, `Options.Check is "read"`
	}
	if s := b.snap.Load(); s != nil && s.claim != nil {
		return checkWatch, ""
	}
	if w := b.watchWhy.Load(); w != nil {
		why = *w
	}
	return checkStat, why
}

// close drops the binding's subscription for good: a binding no guard
// uses, or a closed guard's. A read still in flight finds it closed, and
// no later read subscribes again. Checks on the watch path turn to the
// stat path.
func (b *binding) close() {
	b.closed.Store(true)
	if sub := b.sub.Swap(nil); sub != nil {
		sub.Close()
	}
	b.pathChanged()
}
