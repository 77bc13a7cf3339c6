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

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// binding is one bound checkout: what the guard bound to (the identity, the
// updater's files as they were then, the change signals), and the proof,
// kept between checks, that the checkout's files did not change. The proof
// is the watch path (an inotify subscription armed by each full read, so
// that a check costs one system call) where the platform and file system
// allow it, else the stat path (a stat of each file the answer depends on).
//
// A module that no Git checkout identifies is bound without Git, by its
// file and its install's build stamp (see gitread.Install). It is read and
// proven unchanged in the same ways; its files are the links on the way,
// the module and the stamp, and no Git file.
//
// Its methods are safe for concurrent use. Every stat and read of the
// checkout runs on the checkout's executor, in the lane of the binding's
// looks, so that the checks in flight share one look; no caller waits for
// it past its timeout. newBinding makes a binding.
type binding struct {
	// configured is the module path as configured, absolute (see
	// gitread.Abs: on Unix, not cleaned) with its links unresolved: every
	// full read resolves it again, and a path that now leads to another
	// module file makes the runtime stale.
	configured string
	// file names the module file of a binding bound without Git, and
	// build is the build its stamp named then (see boundTo); "" for a
	// binding bound by Git.
	file, build string

	// cfg is the guard's configuration: its check mode (Options.Check),
	// the environment the checkout is read through, where an install's
	// build stamp is, and the executor of the updater's files.
	cfg *config

	snap atomic.Pointer[snapshot]
	// failed is the latest full read's failure, where the content of settled
	// files decided it: while a stat finds those files unchanged, it is the
	// answer, and nothing is read again (so a corrupt index of 256 MiB is not
	// read on every check).
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
	// latest full read, when it succeeded (links resolved); nil
	// otherwise: see installDirs.
	readModule atomic.Pointer[string]

	// x is the guard's executor, which runs every look at the checkout;
	// looks is the lane of the binding's looks (the stats of the stat
	// path, full reads).
	x     *bounded.Executor
	looks bounded.Lane[lookResult]
	// counts counts full reads and the checks that gave up waiting; nil
	// for none.
	counts *counters

	id Identity
	// by is how the install is identified (see Observation.IdentifiedBy);
	// reason, for one bound without Git, says why Git does not identify it.
	by, reason string
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

	// obs is the lane of the reads of a stale answer on the executor of
	// the updater's files (cfg.ux), diag of a diagnostic's (Guard.Observe),
	// which reads the receipts too.
	obs  bounded.Lane[Observation]
	diag bounded.Lane[Observation]
	// answered is the latest stale answer's read of the updater's files:
	// see Guard.observe.
	answered atomic.Pointer[answeredRead]

	// The logs of its stale checks (see Guard.logStale): staleSeen is set
	// while a stale check was logged and no check found it current since;
	// staleCount counts its stale checks; staleLogged is when a stale
	// check was last logged (Unix nanoseconds), and staleUnlogged how many
	// were refused since.
	staleSeen     atomic.Bool
	staleCount    atomic.Uint64
	staleLogged   atomic.Int64
	staleUnlogged atomic.Uint64
	// plans are the reloads planned on the binding: they live and die
	// with it.
	plans planLife
}

// answeredRead is an observation of a stale answer, when its read was
// asked for, and the module file the checkout's latest full read led to
// then (see binding.readModule): its install directories.
type answeredRead struct {
	at     time.Time
	module *string
	o      Observation
}

// newBinding returns a binding of the configured path abs that has read
// nothing yet. Its looks run on the checkout's executor, and its reads of
// the updater's files on the install's (see updaterExecutor); counts
// (nil for none) counts them. Its first read identifies a module that no
// Git checkout tracks by the build stamp cfg.stamp names (see gitread.Ask).
// guardClosed, if not nil, is set once the guard is closed.
func newBinding(cfg *config, abs string, boundAt time.Time, guardClosed *atomic.Bool, counts *counters) *binding {
	return &binding{
		x: checkoutExecutor(abs), configured: abs, cfg: cfg,
		sub: new(subRef), guardClosed: guardClosed, counts: counts,
		boundAt: boundAt, sig: newSignal(), replaced: newSignal(),
	}
}

// boundTo records c, the answer of the binding's first read: the module
// file and, where no Git checkout identifies it, the file itself and the
// build its stamp names. Later full reads compare with them (see run): a
// path that leads to another module file is errElsewhere; without Git,
// another file (or none) at the module's path is errReplaced, and a stamp
// that no longer names a build is an answer with no revision. boundTo must
// be called before the binding is shared.
func (b *binding) boundTo(c *gitread.Checkout) {
	if c.Install != nil {
		b.file, b.build = c.Install.File, c.Revision
	}
}

func (b *binding) countRead() {
	if b.counts != nil {
		b.counts.fullReads.Add(1)
	}
}

func (b *binding) countTimeout() {
	if b.counts != nil {
		b.counts.readTimeouts.Add(1)
	}
}

// failure is a full read's failure and the files that decided it.
type failure struct {
	deps gitread.Deps
	err  error
}

// subRef holds a binding's subscription apart from the binding, so that
// the garbage collector can close it once the binding is unreachable.
type subRef struct{ atomic.Pointer[watch.Sub] }

// snapshot is the result of a full read with the stamps of every file it
// depends on. Trusted is false when a stamp could hide a later change.
// Claim, when the binding's inotify subscription was armed for these files
// by the read, proves them unchanged: the watch path; nil on the stat
// path. A published snapshot is never written again.
type snapshot struct {
	// Rev is the revision the read found, or "".
	Rev string
	// Deps are the files the answer depends on, with their stamps.
	Deps gitread.Deps
	// Trusted is true when no stamp of Deps could hide a later change.
	Trusted bool
	// Claim is the watch's proof of Deps; nil on the stat path.
	Claim *watch.Read
	// NoRev is why Rev is empty (see noRevision); nil otherwise.
	NoRev error
	// Index is the read's answer of the index, when its stamp was settled
	// as the read began: the next read takes it again where a stat finds
	// the index unchanged, and does not read it.
	Index *gitread.Index
}

// lookResult is what one look at the checkout found: the revision, or
// why there is none.
type lookResult struct {
	// Rev is the revision, or "".
	Rev string
	// Err is why the look found no answer.
	Err error
	// Checkout is what a full read found (zero for a look answered by
	// stats).
	Checkout gitread.Checkout
	// Snap is the snapshot of the answer; nil unless the look succeeded.
	Snap *snapshot
	// Unchanged, for a binding's first read, is true when a stat of every
	// file it depended on, after it returned, found it unchanged.
	Unchanged bool
}

// readCall is one look at the checkout: a stat of each file the snapshot
// depends on, or a full read.
type readCall = bounded.Task[lookResult]

// current returns the checkout's revision now: from the snapshot when the
// watch proves nothing changed (one system call, in the caller's
// goroutine: it cannot block), or a stat of each of its files does, else
// from a full read (always, where Options.Check is "read"). Stats and
// reads run on a goroutine of their own: see look.
//
// A check whose snapshot's read was overtaken by a read that began
// meanwhile (another check found a change, or its own poll was not sure)
// waits for that read, then asks its new snapshot: a read that was not
// overtaken answers for now, whenever it began, since every change after it
// began is reported. So a herd of checks around one read starts no read of
// its own after it.
//
// The waits for those reads and the check's own look share one timeout:
// no check waits longer than timeout for the checkout in all.
func (b *binding) current(timeout time.Duration) (string, error) {
	var since time.Time // when the first wait for a read began
	waited := false
	for retry := 0; b.cfg.check != checkRead; retry++ {
		s := b.snap.Load()
		if s == nil || s.Claim == nil {
			break
		}
		if s.Claim.Unchanged() || s.Claim.Recheck() {
			return s.Rev, s.NoRev
		}
		if retry == maxOvertaken || !s.Claim.Overtaken() {
			break
		}
		if !waited {
			since, waited = time.Now(), true
		}
		if !bounded.Await(b.x, &b.looks, timeout-time.Since(since)) {
			break
		}
	}
	if waited {
		left := timeout - time.Since(since)
		if left <= 0 {
			b.countTimeout()
			return "", readTimeout(fmt.Sprintf("the reads of %s a check waited for took its whole %v", b.configured, timeout))
		}
		timeout = left
	}
	call, err := b.look(context.Background(), timeout, false)
	if err != nil {
		return "", err
	}
	if r := &call.Val; r.Err == nil && r.Snap != nil {
		return r.Rev, r.Snap.NoRev
	}
	return call.Val.Rev, call.Val.Err
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
// unless mustExist (a first read) or Options.Check is "read"; where they
// are unchanged it answers with the snapshot, else it reads the checkout.
func (b *binding) look(ctx context.Context, timeout time.Duration, mustExist bool) (*readCall, error) {
	l := &b.looks
	if mustExist {
		l = nil // a bind's read is its own
	}
	call, stuck := bounded.Submit(ctx, b.x, l, timeout, func(c *readCall) { b.run(c, mustExist) }, nil)
	if stuck == nil {
		if call.Err != nil {
			return nil, call.Err
		}
		return call, nil
	}
	if stuck.Ctx != nil {
		return nil, stuck.Ctx
	}
	b.countTimeout()
	return nil, readTimeout("a look at " + b.configured + " " + stuckWhy(stuck))
}

// statsUnchanged asks of each of deps, by its path, whether what the read
// found there still holds for git (see gitread.Dep.Holds); c names the one
// being asked.
func statsUnchanged(c *readCall, fs *gitread.FS, deps gitread.Deps) bool {
	for i := range deps {
		c.At.Store(&deps[i].Path)
		if !deps[i].Holds(fs) {
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
// to the waiting callers. A panic in the read becomes a *PanicError: the
// runtime is then stale, and the host lives on.
//
// The previous snapshot stays published while the read runs: it remains a
// valid proof for any check whose stats still match it.
func (b *binding) run(call *readCall, mustExist bool) {
	r := &call.Val
	defer func() {
		if p := recover(); p != nil {
			r.Rev, r.Snap = "", nil
			r.Err = panicError(p, debug.Stack())
		}
	}()
	e, alwaysRead := b.cfg.env, b.cfg.check == checkRead
	if s := b.snap.Load(); s != nil && !alwaysRead && !mustExist && s.Claim == nil && s.Trusted && statsUnchanged(call, e.git, s.Deps) {
		r.Rev, r.Snap = s.Rev, s
		return
	}
	if f := b.failed.Load(); f != nil && !alwaysRead && !mustExist && statsUnchanged(call, e.git, f.deps) {
		r.Err = f.err // the same files: the same failure, not read again
		return
	}
	start := e.now()
	claim, watching := b.armable()
	fsys := tracking(e.git, &call.At)
	b.countRead()
	var prevIndex *gitread.Index
	if s := b.snap.Load(); s != nil && !alwaysRead && !mustExist {
		prevIndex = s.Index
	}
	ask := gitread.Ask{MustExist: mustExist, Prev: prevIndex, Routes: watching}
	if b.file != "" {
		ask.Stamp = b.cfg.stamp // bound without Git: no Git file is read
	}
	c, deps, routes, index, err := gitread.ReadWith(fsys, b.configured, ask)
	var gitDeps gitread.Deps
	if err == nil && mustExist && b.cfg.stamp != nil && c.Revision == "" && !c.Transient {
		// A first read that Git does not identify identifies the install
		// without Git, which is what later reads read: the Git files that
		// decided so need only hold still while it binds.
		reason := c.Reason
		gitDeps = deps
		c, deps, routes, index, err = gitread.ReadWith(fsys, b.configured, gitread.Ask{Routes: watching, Stamp: b.cfg.stamp})
		c.Reason = reason
	}
	r.Checkout = c
	if err == nil {
		b.readModule.Store(&c.ModulePath)
	} else {
		b.readModule.Store(nil)
	}
	switch {
	case err != nil:
		r.Err = err
		if !alwaysRead && gitread.FromContent(err) && deps.Settled(start) {
			b.failed.Store(&failure{deps: deps, err: err})
		}
		return
	case b.id.ModulePath != "" && c.ModulePath != b.id.ModulePath:
		r.Err = fmt.Errorf("%s now leads to %s, not to %s: %w", b.configured, c.ModulePath, b.id.ModulePath, errElsewhere)
		return
	case b.file != "" && c.Install.File == "":
		r.Err = fmt.Errorf("no file is at %s any more: %w", c.ModulePath, errReplaced)
		return
	case b.file != "" && c.Install.File != b.file:
		r.Err = fmt.Errorf("another file is at %s (file %s, not %s): %w", c.ModulePath, c.Install.File, b.file, errReplaced)
		return
	}
	s := &snapshot{Rev: c.Revision, Deps: deps, Trusted: !alwaysRead && deps.Settled(start)}
	if index != nil && !alwaysRead && index.Settled(start) {
		s.Index = index
	}
	switch {
	case c.Revision != "":
	case c.Install == nil:
		s.NoRev = noRevision(c.Reason)
	case b.build != "":
		s.NoRev = errors.New(c.Install.NoBuild) // the stamp named a build
	}
	if watching && b.sub.Load() == claim.Sub() {
		call.At.Store(&arming)
		if b.arm(fsys, claim.Sub(), deps, routes, start) {
			s.Claim = &claim
		}
	}
	if mustExist {
		// An install whose module went between the two reads is no
		// binding either: its next read says what is there.
		r.Unchanged = deps.Unchanged(fsys) && gitDeps.Unchanged(fsys) && (c.Install == nil || c.Install.File != "")
	}
	b.failed.Store(nil)
	if prev := b.snap.Swap(s); prev == nil || (prev.Claim != nil) != (s.Claim != nil) {
		b.pathChanged()
	}
	r.Rev, r.Snap = c.Revision, s
}

// pathSignal returns a channel closed when checks of the unchanged
// checkout change path (watch or stat) next.
func (b *binding) pathSignal() <-chan struct{} { return loadSignal(&b.pathSig).c }

// pathChanged fires the path signal and makes a new one.
func (b *binding) pathChanged() {
	if old := b.pathSig.Swap(newSignal()); old != nil {
		old.fire()
	}
}

// unused reports whether the binding may no longer watch: its guard no
// longer uses it (see close), or was closed.
func (b *binding) unused() bool {
	return b.closed.Load() || b.guardClosed != nil && b.guardClosed.Load()
}

// installDirs are the source directories whose recovery markers count:
// the bound one, and, where the configured path now leads to
// another directory (a deploy flipped a link), that one, whose code a
// reload would load.
//
// For a caller that has just looked at the checkout (a stale answer
// after its check, a binding just read), where that look's full read
// succeeded, the directory it resolved the configured path to is the one:
// every check looks at the checkout first, and reads it again once
// anything on the way to the module changed. Else, and always where
// resolve is true (a caller that did not look first), the path is
// resolved again.
func (b *binding) installDirs(resolve bool) []string {
	sourceDir := b.id.SourceDir
	if b.configured == "" {
		return []string{sourceDir}
	}
	dirs := []string{sourceDir}
	mod, err := "", error(nil)
	if m := b.readModule.Load(); m != nil && !resolve {
		mod = *m
	} else if mod, err = gitread.ResolvePath(b.configured); err != nil {
		return dirs
	}
	if filepath.Dir(mod) != sourceDir {
		dirs = append(dirs, filepath.Dir(mod))
	}
	return dirs
}

// installDirsWithin is installDirs, for a read of the updater's files:
// where the configured path is resolved again, that runs on the executor
// of the checkout (which reads it), until deadline at the latest; past it,
// the directory bound is the one.
func (b *binding) installDirsWithin(resolve bool, deadline time.Time) []string {
	if m := b.readModule.Load(); b.configured == "" || m != nil && !resolve {
		return b.installDirs(resolve) // nothing to read
	}
	dirs, why := runWithin(b.x, deadline, func(t *bounded.Task[[]string]) { t.Val = b.installDirs(resolve) })
	if why != "" {
		return []string{b.id.SourceDir}
	}
	return dirs
}

// errElsewhere is a configured module path that now leads to another file
// than the one the guard bound to.
var errElsewhere = errors.New("the module path leads elsewhere")

// errReplaced is a module of an install without Git that another file, or
// nothing, now stands in place of: a file renamed over it (rsync, a
// package manager), or its removal.
var errReplaced = errors.New("the module file was replaced")

// armable prepares a full read on the watch path: it subscribes the
// binding, where the platform has inotify, on its first read and on every
// read after an arming failed (a file system that now reports its
// changes, a watch limit no longer reached), and begins the read on the
// subscription, so that every change from here on is seen. It returns the
// read's claim, and false on the stat path.
func (b *binding) armable() (watch.Read, bool) {
	if b.cfg.check == checkRead || b.watchOff.Load() || b.unused() {
		return watch.Read{}, false
	}
	sub := b.sub.Load()
	if sub == nil {
		w, err := b.cfg.env.watch()
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

// checkMode is how checks prove the checkout unchanged: the words of
// Options.Check and Observation.Check.
type checkMode string

// The words of Options.Check and Observation.Check.
const (
	checkWatch checkMode = "watch" // checks watch the checkout's files
	checkStat  checkMode = "stat"  // checks stat them
	checkRead  checkMode = "read"  // checks read the checkout
)

// checkPath says how a check of the unchanged checkout proves it
// unchanged (checkWatch, checkStat or checkRead), and why not by
// watching. A binding that may no longer watch (see binding.unused) is on
// the stat path from then on, whatever its last snapshot claimed.
func (b *binding) checkPath() (check checkMode, why string) {
	if b.cfg.check == checkRead {
		return checkRead, `Options.Check is "read"`
	}
	if b.guardClosed != nil && b.guardClosed.Load() {
		return checkStat, "the guard is closed"
	}
	if b.closed.Load() {
		return checkStat, "the guard was bound anew"
	}
	if s := b.snap.Load(); s != nil && s.Claim != nil {
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

// git reports whether Git identifies the install the binding is bound to.
func (b *binding) git() bool { return b.by == identifiedByGit }

// The words of Observation.IdentifiedBy.
const (
	identifiedByGit   = "git"
	identifiedByStamp = "build stamp"
	identifiedByFile  = "file"
)

// identifiedBy is how the first read of a binding, c, identifies the
// install: by Git, else by its build stamp where it names a build, else
// by the module file alone.
func identifiedBy(c *gitread.Checkout) string {
	switch {
	case c.Install == nil:
		return identifiedByGit
	case c.Revision != "":
		return identifiedByStamp
	}
	return identifiedByFile
}
