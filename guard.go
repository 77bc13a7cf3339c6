package runtimeguard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// Identity is what a guard bound to: the checkout's source directory and
// module file (absolute, symbolic links resolved) and the revision of HEAD
// then.
//
// A module that is not tracked in a Git checkout whose HEAD names a
// commit (a release directory behind a link, a Docker image, a Nix store
// path, a desktop app) is identified without Git, by what it is: its path
// with links resolved, the module file itself (its device and inode, on
// Windows its file ID), and the build its install's stamp names where the
// [Layout] names one (Hermes's install-stamp.json). Revision is then that
// build's commit, or empty where no stamp names one, and
// [Observation].IdentifiedBy and Unguarded say how and why
// ([Options.RequireCheckout] makes binding to it an error instead). A
// check of it is stale once the path leads to another file (a link
// flipped to another release), another file, or none, is at the module's
// path (renamed over it by rsync or a package manager, or removed), or
// the stamp names another build, or none where it named one; a write in
// place of the same file is not a move. Such a guard stays bound so when
// the module is later tracked in a checkout, since the code the server
// loaded came from none: a check does not bind it anew; [Guard.Capture],
// called once the host loaded the module again, does.
type Identity struct {
	// SourceDir is the directory that holds the module.
	SourceDir string `json:"source_dir"`
	// ModulePath is the module file.
	ModulePath string `json:"module_path"`
	// Revision is the full hex object id of HEAD at binding; for an
	// install without Git, the commit its build stamp named, or empty.
	Revision string `json:"revision"`
}

// Guard binds to the Git checkout a server loaded code from and tells, on
// every check, whether that checkout still is at the bound revision (an
// install without Git: whether its module file and build stamp still are
// the bound ones, see [Identity]).
//
// Make one with [New]. The zero Guard is unbound, with the options of a
// zero [Options]; [Guard.Capture] can bind it. A nil *Guard is an unbound
// guard that holds nothing and that Capture never binds.
//
// A Guard is safe for concurrent use by any number of goroutines, and any
// number of guards may live in one process. Concurrent checks of one guard
// share its binding's proof that no file changed, the look at the checkout
// (see [Guard.EnsureCurrent]) and the read of the updater's files of a
// stale answer; nothing they share is locked on the watch path. Every
// touch of the file system of a guard runs on a goroutine the process
// keeps for what it reads, one at a time (one for the checkout's
// directory, one for the updater's install, shared with every guard and
// [Observe] of the process that reads the same), and no call waits for it
// past [Options.ReadTimeout] (or its context): a file system that hangs
// holds that goroutine, and nothing else, until it answers, however many
// calls come meanwhile.
type Guard struct {
	cfg  *config   // set by New, or once by the first use of a zero Guard
	once sync.Once // resolves cfg for the zero Guard

	bindMu sync.Mutex // serializes the swaps of bound, and Close's look at it
	bound  atomic.Pointer[binding]
	first  atomic.Pointer[signal] // the change signal of Capture's bindings

	unboundObs  bounded.Lane[Observation] // the reads of the updater's files of an unbound guard
	unboundDiag bounded.Lane[Observation] // and of its diagnostics
	closed      atomic.Bool               // set by Close
	closedSig   signal                    // fired by Close; its channel made on first use
	closedOnce  sync.Once

	reloader atomic.Bool  // a Reloader runs for the guard
	auto     atomic.Int32 // the Reloader's state: autoWaiting or autoRefused

	counts counters // see Stats
}

// New validates opts and, when opts.ModulePath is set, binds to it now. A
// module path that leads to no file is an error matching [ErrNoModule], and
// a checkout that cannot be read is an error. A module that is not tracked
// in a checkout whose HEAD names a commit binds without Git, by its file
// and its build stamp (see [Identity]), which the guard says: once at Warn
// in [Options.Logger], and in [Observation].Unguarded; with
// [Options.RequireCheckout], New fails with an error matching
// [ErrNotCheckout] instead. An option that describes no
// guard is an [*OptionError] naming the field.
func New(opts Options) (*Guard, error) {
	return newGuard(opts, systemEnv)
}

func newGuard(opts Options, e *env) (*Guard, error) {
	g := new(Guard)
	cfg, err := opts.resolveOn(e)
	if err != nil {
		return nil, err
	}
	g.cfg = cfg
	if opts.ModulePath != "" {
		if err := g.Capture(opts.ModulePath); err != nil {
			g.Close() // nothing of a guard that failed lives on
			return nil, err
		}
	}
	return g, nil
}

// nilGuard returns what a nil *Guard stands for: a zero Guard, closed,
// which Capture refuses to bind.
func nilGuard() *Guard {
	nilGuardOnce.Do(func() {
		nilGuardVal = new(Guard)
		nilGuardVal.Close()
	})
	return nilGuardVal
}

var (
	nilGuardOnce sync.Once
	nilGuardVal  *Guard
)

// config returns the guard's configuration: New's, or for the zero Guard
// that of a zero Options, resolved once on first use.
func (g *Guard) config() *config {
	g.once.Do(func() {
		if g.cfg == nil {
			var zero Options
			g.cfg, _ = zero.resolveOn(systemEnv) // the zero Options is valid
		}
		// A guard dropped without Close closes the pidfd its stale
		// answers kept once the collector finds it.
		if c := g.cfg.env.upd.Cache; c != nil {
			runtime.AddCleanup(g, func(c *updater.Cache) { c.Close() }, c)
		}
	})
	return g.cfg
}

// Capture binds the guard to the checkout of the module at modulePath, the
// file the server actually loaded (never a configured discovery directory).
//
// While the guard is bound to a Git checkout, Capture does not rebind: for
// the module it is bound to, it verifies exactly as [Guard.EnsureCurrent]
// does, and a failed read cannot erase or downgrade the known revision;
// for another module it is an error. An unbound guard, or one bound to an
// install without Git (see [Identity]), binds anew.
func (g *Guard) Capture(modulePath string) error {
	if g == nil {
		return errors.New("runtimeguard: capture " + modulePath + ": a nil *Guard binds nothing")
	}
	cfg := g.config()
	abs, err := gitread.Abs(modulePath)
	if err != nil {
		if modulePath == "" { // leads to no file
			err = &classError{err, ErrNoModule}
		}
		return fmt.Errorf("runtimeguard: %w", err)
	}
	for {
		if b := g.bound.Load(); b != nil && b.git() {
			return g.captureBound(cfg, b, abs)
		}
		b, err := g.captureNew(cfg, abs)
		if err != nil {
			return err
		}
		// Nothing is read while the lock is held: Close never waits on
		// a file system.
		g.bindMu.Lock()
		if cur := g.bound.Load(); cur != nil && cur.git() {
			g.bindMu.Unlock()
			b.close() // another Capture bound meanwhile: verify against it
			continue
		}
		old := g.bound.Swap(b)
		if g.closed.Load() {
			b.close()
		}
		g.bindMu.Unlock()
		if old != nil {
			old.close() // a binding without Git replaced
			old.replaced.fire()
		}
		return nil
	}
}

// captureBound is Capture of abs on a guard bound to b, a Git checkout:
// the path b was bound to is verified as a check is; another
// path must lead to the same module.
func (g *Guard) captureBound(cfg *config, b *binding, abs string) error {
	if abs != b.configured { // the same path is verified as a check is, within ReadTimeout
		t, stuck := bounded.Submit(context.Background(), checkoutExecutor(abs), nil, cfg.timeout, func(t *bounded.Task[string]) {
			t.Val, _ = gitread.ResolvePath(abs)
		}, nil)
		if stuck != nil {
			why := fmt.Sprintf("did not resolve within %v", cfg.timeout)
			if stuck.Full != "" {
				why = "was not resolved: " + stuck.Full
			}
			return classed(ErrReadTimeout, "runtimeguard: capture %s: its path %s: %s", abs, why, classWords(ErrReadTimeout))
		}
		if t.Val != b.id.ModulePath {
			return fmt.Errorf("runtimeguard: capture %s: the guard is bound to %s at %s; a guard binds once", abs, b.configured, b.id.Revision)
		}
	}
	return g.EnsureCurrent()
}

// captureNew makes the binding of a Capture of abs, on a guard bound to no
// Git checkout, and checks it against the options.
func (g *Guard) captureNew(cfg *config, abs string) (*binding, error) {
	b, err := g.bind(context.Background(), cfg, abs)
	if errors.Is(err, gitread.ErrNoModule) {
		err = &classError{err, ErrNoModule}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == abs {
			return nil, fmt.Errorf("runtimeguard: %w", err)
		}
		return nil, fmt.Errorf("runtimeguard: bind %s: %w", abs, err)
	}
	b.sig = g.firstSignal()
	if !b.git() {
		if err := g.withoutGit(cfg, b, abs); err != nil {
			b.close()
			return nil, err
		}
	}
	if cfg.expect != "" {
		if len(cfg.expect) != len(b.id.Revision) {
			b.close()
			return nil, optionError("Options.ExpectRevision", cfg.expect, fmt.Sprintf("has %d hex digits; the object ids of the repository of %s have %d", len(cfg.expect), abs, len(b.id.Revision)))
		}
		b.id.Revision = cfg.expect
	}
	if cfg.expectReceipt != "" {
		// The new process of a handover: an update begun since the plan
		// (a marker, a recovery marker, another receipt) means the code
		// on disk may not be what the plan proved.
		o := g.observeRead(context.Background(), cfg, b, newestReceipt, false)
		why := updaterBusy(&o)
		switch {
		case why != "":
			why = strings.TrimPrefix(why, pendingPrefix)
		case o.Receipt == nil && o.ReceiptProblem != "":
			why = o.ReceiptProblem
		case o.Receipt == nil || o.Receipt.ID != cfg.expectReceipt:
			why = "the newest receipt is no longer " + cfg.expectReceipt
		}
		if why != "" {
			b.close()
			return nil, classed(ErrNotReady, "runtimeguard: bind %s with ExpectReceipt: %s: %s", abs, why, classWords(ErrNotReady))
		}
	}
	return b, nil
}

// Close releases what the guard holds in the kernel and ends its
// [Guard.Watch]: the inotify watches of its binding, now and for every
// binding it makes later, and the descriptor of the updater's process a
// stale answer keeps. It is for hosts that make guards dynamically; a
// guard that is simply dropped releases both once the garbage collector
// finds it unreachable. Close is idempotent, safe while checks
// run, and never waits on a file system: checks after it go on
// answering, each by a stat of the files the answer depends on (or a full
// read), never by a watch again.
//
// While it lives, a guard holds: on the watch path, inotify watches on the
// process's one inotify descriptor (shared by every guard and never
// closed), one per directory on the way to each file its answer depends
// on and one per such file, at most 256; while [Guard.Watch] runs, an
// epoll descriptor, an eventfd and a descriptor of /proc/self/mountinfo;
// while a stale answer found an update under way, a descriptor of the
// updater's process (Linux); and, while it works on the file system, one
// goroutine for its checkout and one for the updater's files, shared with
// the other guards that read the same, each of which ends once its work
// is done: a file system that does not answer holds it until it answers.
func (g *Guard) Close() error {
	if g == nil {
		g = nilGuard()
	}
	g.closed.Store(true)
	g.closedSignal().fire()
	g.bindMu.Lock() // a binding being stored now is stored, then closed
	b := g.bound.Load()
	g.bindMu.Unlock()
	if b != nil {
		b.close()
	}
	g.config().env.upd.Cache.Close()
	return nil
}

// closedSignal is the signal Close fires.
func (g *Guard) closedSignal() *signal {
	g.closedOnce.Do(func() {
		if g.closedSig.c == nil {
			g.closedSig.c = make(chan struct{})
		}
	})
	return &g.closedSig
}

// Binding retries: a read that raced a change, or found HEAD naming a
// branch that is missing while the repository has others (a rename in
// progress), is read again after a pause that doubles up to
// maxBindBackoff.
const (
	maxBindAttempts = 10
	maxBindBackoff  = 100 * time.Millisecond
)

// bind reads the checkout the configured path abs leads to until the view
// holds still: the read succeeded, no file it depended on changed while it
// ran, and HEAD does not name a branch that is missing while the
// repository has other refs. A transient state never becomes the bound
// identity, least of all one without Git; a checkout that does not hold still
// for any of maxBindAttempts reads is an error. Its reads run on the
// guard's executor, each within ReadTimeout; ctx ends its pauses and
// waits.
func (g *Guard) bind(ctx context.Context, cfg *config, abs string) (*binding, error) {
	e := cfg.env
	backoff := time.Millisecond
	var moving error
	for attempt := 0; attempt < maxBindAttempts; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			backoff = min(2*backoff, maxBindBackoff)
		}
		b := newBinding(cfg, abs, e.now(), &g.closed, &g.counts)
		// The receipts are listed before the read: see binding.receiptsAt.
		rf, stuck := bounded.Submit(ctx, b.ux, nil, cfg.timeout, func(t *bounded.Task[*updater.ReceiptFiles]) {
			t.Val = cfg.listReceipts()
		}, nil)
		if stuck != nil {
			if stuck.Ctx != nil {
				return nil, stuck.Ctx
			}
			g.counts.readTimeouts.Add(1)
			on := ""
			switch {
			case stuck.Full != "":
				return nil, classed(ErrReadTimeout, "the listing of the updater's receipts was not started: %s: %s", stuck.Full, classWords(ErrReadTimeout))
			case stuck.At != "":
				on = ", blocked on " + stuck.At
			}
			return nil, classed(ErrReadTimeout, "the listing of the updater's receipts did not return within %v%s: %s", cfg.timeout, on, classWords(ErrReadTimeout))
		}
		b.receiptsAt = rf.Val
		call, err := b.look(ctx, cfg.timeout, true)
		if err == nil {
			err = call.Val.Err
		}
		switch {
		case err != nil && errors.Is(err, fsread.ErrChanged):
			moving = err
			b.close()
			continue
		case err != nil:
			b.close()
			return nil, err
		case call.Val.Checkout.Transient:
			moving = fmt.Errorf("HEAD names %s, which does not exist while other refs do (a branch being renamed or deleted, or an orphan branch)", call.Val.Checkout.Head)
			b.close()
			continue
		case !call.Val.Unchanged:
			moving = errors.New("the checkout changed while it was read")
			b.close()
			continue
		}
		c := call.Val.Checkout
		b.id = Identity{SourceDir: c.SourceDir, ModulePath: c.ModulePath, Revision: c.Revision}
		b.boundTo(&c)
		b.by, b.reason = identifiedBy(&c), c.Reason
		return b, nil
	}
	return nil, fmt.Errorf("the checkout did not hold still for any of %d reads: %w", maxBindAttempts, moving)
}

// EnsureCurrent returns nil when the guard is unbound, or when the bound
// checkout's HEAD still is the bound revision and the configured module
// path still leads to the bound module (for an install without Git: to
// the bound module file, its stamp naming the bound build, see
// [Identity]). Otherwise it returns a *[StaleError]; any failure to read
// the revision counts as a change.
//
// A check sees every change that completed before it began: it never uses a
// result older than its own start. (Writes that reach a file without the
// kernel's notice, through Linux AIO or a shared mapping, are the
// exceptions: docs/checking.md in the repository lists them, and
// [Options].Check "read" sees them all.) On an unchanged checkout it costs, on
// the watch path (Linux, see [Observation].Check), one non-blocking system
// call on the inotify descriptor and no allocation; on the stat path one
// stat of each file the answer depends on (HEAD, the branch's loose ref or
// packed-refs, the index, the config, and every link and directory on the
// way to the module); with [Options].Check "read", a full read. When one
// changed, or a file is too recent for its timestamp to prove anything
// (Git's "racy" rule), it reads them again.
// The stats and reads run on the guard's goroutine for the file system,
// one at a time: concurrent checks share one that began after they
// arrived, and wait for it at most [Options.ReadTimeout]. A stale answer
// reads the updater's files the same way, within the same bound.
//
// A check answers for the checkout as it is: one that moved back to the
// bound revision is current again ([Guard.Changed] stays closed).
//
// EnsureCurrent never schedules, requests or performs a restart.
func (g *Guard) EnsureCurrent() error {
	if g == nil {
		g = nilGuard()
	}
	g.counts.checks.Add(1)
	b := g.bound.Load()
	if b == nil {
		return nil
	}
	cfg := g.config()
	rev, err := b.current(cfg.timeout)
	if err == nil && rev == b.id.Revision {
		if b.staleSeen.Load() && b.staleSeen.CompareAndSwap(true, false) {
			g.logCurrentAgain(cfg, b)
		}
		return nil
	}
	g.counts.stale.Add(1)
	b.sig.fire()
	o := g.observe(cfg, b)
	se := &StaleError{
		Message:  cfg.message,
		State:    o.State,
		Captured: b.id.Revision,
		Current:  rev,
		Err:      err,
	}
	if b.plans.isScheduled() {
		se.Message, se.RestartScheduled = cfg.reloadMessage, true
	} else if errors.Is(err, errors.ErrUnsupported) {
		se.Message = cfg.unsupportedMessage // no restart can bind it, nor a reload prove it
	} else if g.reloader.Load() && g.auto.Load() == autoWaiting {
		se.Message = cfg.autoMessage
	}
	g.logStale(cfg, b, se, &o)
	return se
}

// Identity returns what the guard is bound to; the zero Identity when it is
// unbound.
func (g *Guard) Identity() Identity {
	if g == nil {
		g = nilGuard()
	}
	if b := g.bound.Load(); b != nil {
		return b.id
	}
	return Identity{}
}

// Paths returns the paths the guard's options resolved to at [New] (the
// zero Guard's, those of a zero [Options], at its first use). A
// tool that writes the updater's files, or shows where a guard would look,
// makes a guard with no [Options.ModulePath] for them: New then reads
// neither the checkout nor the updater's files.
func (g *Guard) Paths() Paths {
	if g == nil {
		g = nilGuard()
	}
	return g.config().paths()
}

// Stats counts what a guard did since [New], for an operator's metrics:
// each count only grows, and a snapshot costs a few atomic loads. Publish
// it with the standard library's expvar (see the package examples) or any
// metrics library, and compare two snapshots for rates.
type Stats struct {
	// Checks counts the calls of [Guard.EnsureCurrent], whoever made them
	// ([Guard.Middleware], [Guard.Watch], the host), including those of an
	// unbound guard.
	Checks uint64 `json:"checks"`
	// Stale counts the checks that answered with a *[StaleError]: the
	// 409s the guard caused.
	Stale uint64 `json:"stale"`
	// FullReads counts the full reads of the checkout (HEAD, the refs, the
	// config, the index), made where no proof that nothing changed held,
	// and on every check with [Options].Check "read".
	FullReads uint64 `json:"full_reads"`
	// ReadTimeouts counts the checks that gave up waiting for the file
	// system ([ErrReadTimeout]).
	ReadTimeouts uint64 `json:"read_timeouts"`
	// Reloads counts the reloads carried out by the Reloaders of the
	// guard, and ReloadsAbandoned the planned attempts that were not:
	// work that did not drain by the deadline (each attempt), a restart or
	// a handover that failed or panicked, a checkout that moved again.
	Reloads          uint64 `json:"reloads"`
	ReloadsAbandoned uint64 `json:"reloads_abandoned"`
}

// counters are a guard's counts, each on a cache line of its own so that
// the checks' counting stays cheap from many cores.
type counters struct {
	checks       paddedCount
	stale        atomic.Uint64
	fullReads    atomic.Uint64
	readTimeouts atomic.Uint64
	reloads      atomic.Uint64
	abandoned    atomic.Uint64
}

// paddedCount is a counter alone on its cache line.
type paddedCount struct {
	atomic.Uint64
	_ [56]byte
}

// Stats returns the guard's counts so far.
func (g *Guard) Stats() Stats {
	if g == nil {
		g = nilGuard()
	}
	c := &g.counts
	return Stats{
		Checks:           c.checks.Load(),
		Stale:            c.stale.Load(),
		FullReads:        c.fullReads.Load(),
		ReadTimeouts:     c.readTimeouts.Load(),
		Reloads:          c.reloads.Load(),
		ReloadsAbandoned: c.abandoned.Load(),
	}
}

// Observe reads the updater's files now, as a stale check does, and reports
// everything it found: the marker, the recovery markers of the install
// roots, the newest receipt, and the update state they add up to. It
// waits for them at most [Options.ReadTimeout]: past it the update state
// is unknown, and MarkerReason says why.
func (g *Guard) Observe() Observation {
	if g == nil {
		g = nilGuard()
	}
	cfg := g.config()
	b := g.bound.Load()
	o := g.observeRead(context.Background(), cfg, b, newestReceipt, true)
	if b != nil {
		check, why := b.checkPath()
		o.Check, o.CheckReason = string(check), why
		o.IdentifiedBy = b.by
		if !b.git() {
			o.Unguarded = cmp.Or(b.reason, "HEAD names no commit")
		}
	}
	return o
}

// observe reads the updater's files for b, as a stale answer needs them
// (the update state, no receipt), on the executor of the guard's reads of
// them, waiting for it at most ReadTimeout: past it the observation is
// unknown, with the reason.
//
// A read asked for within staleReuse of the one before, for the same
// install directories (the module file the checkout's latest full read
// led to is the same one), answers again: a server answering nothing but
// 409s reads the updater's files once per staleReuse, not once per
// request. Where the checkout's latest read failed, each answer reads
// them. Measured end to end (internal/cmd/httpbench, the stale port),
// that doubles the 409s a server serves per second; a 409's update state
// is at most staleReuse older than the request.
func (g *Guard) observe(cfg *config, b *binding) Observation {
	now, mod := time.Now(), b.readModule.Load()
	if a := b.answered.Load(); a != nil && mod != nil && a.module != nil && *a.module == *mod && now.Sub(a.at) < staleReuse {
		return a.o
	}
	o := g.observeRead(context.Background(), cfg, b, noReceipt, false)
	b.answered.Store(&answeredRead{at: now, module: mod, o: o})
	return o
}

// staleReuse is how long a stale answer's read of the updater's files
// answers the stale checks after it.
const staleReuse = 10 * time.Millisecond

// observeRead is observe, reading the receipt rr asks for: the stale
// answer's reads and the diagnostic's each share pieces of their own.
// resolve is for a caller that did not look at the checkout just before:
// the install directories are those the module path leads to now (see
// binding.installDirs).
func (g *Guard) observeRead(ctx context.Context, cfg *config, b *binding, rr receiptRead, resolve bool) Observation {
	x, l, src := cfg.ux, &g.unboundObs, ""
	if rr.read {
		l = &g.unboundDiag
	}
	if b != nil {
		x, l, src = b.ux, &b.obs, b.id.SourceDir
		if rr.read {
			l = &b.diag
		}
	}
	if rr.since != nil {
		l = nil // a read of its own
	}
	t, stuck := bounded.Submit(ctx, x, l, cfg.timeout, func(t *bounded.Task[Observation]) {
		defer func() {
			if p := recover(); p != nil {
				t.Val = cfg.unknownObservation(fmt.Sprintf("reading the updater's files panicked: %v", p), src)
			}
		}()
		deadline := time.Now().Add(cfg.timeout)
		if b == nil {
			t.Val = cfg.observeAt(rr, deadline, "")
			return
		}
		t.Val = cfg.observeAt(rr, deadline, b.installDirsWithin(resolve, deadline)...)
	}, nil)
	switch {
	case stuck != nil:
		return cfg.unknownObservation(readStuck(stuck), src)
	case t.Err != nil:
		return cfg.unknownObservation("reading the updater's files ended: "+t.Err.Error(), src)
	}
	return t.Val
}

// readStuck is why a read of the updater's files is unknown, for a caller
// that gave up on it.
func readStuck(s *bounded.Stuck) string {
	switch {
	case s.Ctx != nil:
		return "the read of the updater's files was abandoned: " + s.Ctx.Error()
	case s.Full != "":
		return fmt.Sprintf("a read of the updater's files was not started: %s: %v", s.Full, ErrReadTimeout)
	}
	verb := "did not return within"
	if s.Before {
		verb = "has not returned in"
	}
	on := ""
	if s.At != "" {
		on = ", blocked on " + s.At
	}
	return fmt.Sprintf("a read of the updater's files (the marker, the recovery markers of the install roots, the receipt) %s %v%s: %v", verb, s.Since.Round(time.Millisecond), on, ErrReadTimeout)
}

// staleLogInterval is the least time between two logs of repeated stale
// checks: each says how many were refused since the one before.
const staleLogInterval = 10 * time.Second

// logStale logs a stale check of b: the first at Warn, later ones at
// Debug, at most one per cfg.staleLogEvery with the number refused since,
// none for a binding the guard no longer uses (a check that began before
// a Plan.Bind). An update state that is unknown comes with its reason.
// stale_checks counts b's stale checks: a guard bound anew counts from one.
func (g *Guard) logStale(cfg *config, b *binding, se *StaleError, o *Observation) {
	if g.bound.Load() != b {
		return
	}
	n := b.staleCount.Add(1)
	msg, again := "runtimeguard: the loaded runtime is stale", "runtimeguard: stale runtime refused again"
	if errors.Is(se.Err, errors.ErrUnsupported) {
		const why = ": the checkout's repository format is not supported, so a restart would fail too"
		msg, again = msg+why, again+why
	}
	attrs := []any{"stale", se, "restart_scheduled", se.RestartScheduled, "stale_checks", n}
	if o.State == UpdateUnknown && o.MarkerReason != "" {
		attrs = append(attrs, "update_state_reason", o.MarkerReason)
	}
	now := time.Now().UnixNano()
	if b.staleSeen.CompareAndSwap(false, true) {
		b.staleLogged.Store(now)
		b.staleUnlogged.Store(0)
		cfg.log().Warn(msg, attrs...)
		return
	}
	if cfg.logger == nil {
		return // slog.Default() hears of the first only
	}
	b.staleUnlogged.Add(1)
	last := b.staleLogged.Load()
	if now-last < int64(cfg.staleLogEvery) || !b.staleLogged.CompareAndSwap(last, now) {
		return
	}
	attrs = append(attrs, "refused_since_last_log", b.staleUnlogged.Swap(0), "since", time.Duration(now-last).Round(time.Millisecond))
	cfg.logger.Debug(again, attrs...)
}

// logCurrentAgain logs, at Info, that b's checkout is at the bound
// revision again after a stale check was logged: once per return, with
// b's stale checks so far, as logStale counts them.
func (g *Guard) logCurrentAgain(cfg *config, b *binding) {
	if g.bound.Load() != b {
		return
	}
	cfg.log().Info("runtimeguard: the loaded runtime is current again", "revision", b.id.Revision, "stale_checks", b.staleCount.Load())
}

// withoutGit handles a binding b of the configured path abs that no Git
// checkout identifies: with [Options.RequireCheckout] or
// [Options.ExpectRevision] it is an error matching [ErrNotCheckout];
// otherwise the guard takes it, guarding the install by its module file
// and build stamp, and says why once at Warn: not again for a Capture that
// finds the same module so, for the same reason.
func (g *Guard) withoutGit(cfg *config, b *binding, abs string) error {
	why := cmp.Or(b.reason, "HEAD names no commit")
	switch {
	case cfg.expect != "":
		return classed(ErrNotCheckout, "runtimeguard: bind %s with ExpectRevision %s: %s (%s)", abs, cfg.expect, classWords(ErrNotCheckout), why)
	case cfg.requireCheckout:
		return classed(ErrNotCheckout, "runtimeguard: bind %s with RequireCheckout: %s (%s)", abs, classWords(ErrNotCheckout), why)
	}
	if old := g.bound.Load(); old != nil && !old.git() && old.id == b.id && old.by == b.by && old.reason == b.reason {
		return nil // said already: a Capture again finds the same
	}
	cfg.log().Warn("runtimeguard: no Git checkout identifies the module: the guard identifies the install by its "+b.by,
		"module", b.id.ModulePath, "reason", why, "identified_by", b.by, "revision", b.id.Revision)
	return nil
}

// Changed returns a channel that is closed once the guard has seen its
// checkout move: a check found it stale, or [Guard.Watch] did. A host can
// plan a reload, or show a banner, without waiting for a request. After
// [Plan.Bind], Changed returns a new channel for the new binding. An
// unbound guard's channel is closed by the first move of the checkout it
// then binds to.
func (g *Guard) Changed() <-chan struct{} {
	if g == nil {
		g = nilGuard()
	}
	if b := g.bound.Load(); b != nil {
		return b.sig.c
	}
	s := g.firstSignal()
	if b := g.bound.Load(); b != nil { // bound meanwhile, to this signal
		return b.sig.c
	}
	return s.c
}

// firstSignal is the change signal of the guard's first bindings: made
// once, so that a Changed called before Capture and the binding Capture
// makes share it.
func (g *Guard) firstSignal() *signal {
	if s := g.first.Load(); s != nil {
		return s
	}
	g.first.CompareAndSwap(nil, newSignal())
	return g.first.Load()
}

// Watch checks the checkout until ctx is done or the guard is closed, so
// that [Guard.Changed] fires without a request, and returns ctx's error
// (nil once the guard is closed). On the watch path (see
// [Observation].Check) it checks when the kernel reports an event about
// what the answer depends on, with no polling; elsewhere every interval.
// The interval must be positive on either path, since the path may
// change while Watch runs: Watch returns an error at once otherwise. It
// picks its event source again whenever the
// binding changes path (a ref packed, a watch that could not be armed and
// later could). Once the checkout moved, Changed has fired and Watch rests
// until the guard binds anew ([Plan.Bind], [Guard.Capture]). A stale
// check is logged as any other.
func (g *Guard) Watch(ctx context.Context, interval time.Duration) error {
	if g == nil {
		g = nilGuard()
	}
	if ctx == nil {
		return errNilContext("watch")
	}
	if interval <= 0 {
		return fmt.Errorf("runtimeguard: watch interval %v is not positive", interval)
	}
	closed := g.closedSignal().c
	for {
		if g.closed.Load() {
			return nil
		}
		b := g.bound.Load()
		if b != nil {
			_ = g.EnsureCurrent()
			if !b.sig.fired() {
				if err := g.watchBinding(ctx, b, interval); err != nil {
					return err
				}
				continue // stale, replaced, or closed: look again
			}
		}
		// Stale: nothing more to tell until the guard binds anew.
		// Unbound: look again every interval for a binding.
		var rebound, tick <-chan struct{}
		if b != nil {
			rebound = b.replaced.c
		} else {
			tick = afterChan(interval)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-closed:
			return nil
		case <-rebound:
		case <-tick:
		}
	}
}

// dirty reports whether b's snapshot must be read again before a check
// can answer from it: there is none, it is not watched, or an event touched
// what it depends on since its read began.
func dirty(b *binding) bool {
	s := b.snap.Load()
	return s == nil || s.Claim == nil || s.Claim.Dirty()
}

// afterChan is time.After as a channel of struct{}.
func afterChan(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(d, func() { close(c) })
	return c
}

// watchEventGap spaces the wakeups of a watch by events that were about
// nothing it depends on: a burst of writes beside the checkout costs a
// wakeup per gap, not one per write.
const watchEventGap = 5 * time.Millisecond

// watchBinding checks b until it is stale, replaced or changes path, or
// the guard is closed, or ctx is done; only the last is an error.
func (g *Guard) watchBinding(ctx context.Context, b *binding, interval time.Duration) error {
	closed := g.closedSignal().c
	moved := b.pathSignal() // before the path is looked at: a change after it fires
	if wt := g.waiter(b); wt != nil {
		defer wt.Close()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-moved:
			case <-closed:
			case <-b.sig.c:
			case <-b.replaced.c:
			case <-wctx.Done():
			}
			cancel()
		}()
		stop := context.AfterFunc(wctx, wt.Stop)
		defer stop()
		for {
			if dirty(b) {
				_ = g.EnsureCurrent()
			}
			if b.sig.fired() || b.replaced.fired() || isClosed(moved) {
				return nil
			}
			// Wait only while the snapshot is clean: events that came
			// while the check read (a commit between a read's last look
			// and its arming) were drained by that read's arming, and
			// made it dirty with nothing left for the wait to report.
			if !dirty(b) && !wt.Wait() {
				return ctx.Err()
			}
			time.Sleep(watchEventGap)
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-closed:
			return nil
		case <-b.replaced.c:
			return nil
		case <-moved:
			return nil
		case <-t.C:
		}
		_ = g.EnsureCurrent()
		if b.sig.fired() {
			return nil
		}
	}
}

// waiter is an event source for watching b, when b is on the watch path.
func (g *Guard) waiter(b *binding) *watch.Waiter {
	s := b.snap.Load()
	if s == nil || s.Claim == nil || b.unused() {
		return nil
	}
	w, err := g.config().env.watch()
	if err != nil {
		return nil
	}
	wt, err := w.NewWaiter()
	if err != nil {
		return nil
	}
	return wt
}

// isClosed reports whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// newSignal returns a signal that has not fired.
func newSignal() *signal { return &signal{c: make(chan struct{})} }

// signal is a channel closed once.
type signal struct {
	c    chan struct{}
	once sync.Once
}

func (s *signal) fire() { s.once.Do(func() { close(s.c) }) }

// fired reports whether the signal fired.
func (s *signal) fired() bool {
	select {
	case <-s.c:
		return true
	default:
		return false
	}
}
