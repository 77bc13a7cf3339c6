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

// Identity is what a guard is bound to: the module file and its directory
// (links resolved) and HEAD's revision, or without Git the build that
// [Layout].Stamp names.
type Identity struct {
	SourceDir  string `json:"source_dir"`
	ModulePath string `json:"module_path"`
	Revision   string `json:"revision"`
}

// Guard checks that the Git checkout a server loaded its code from has not
// moved since. Make one with [New]; the zero Guard is unbound, and
// [Guard.Capture] binds it; a nil *Guard is unbound and never binds. A
// Guard is safe for concurrent use.
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

// New validates opts and binds the guard to opts.ModulePath, if set (see
// [Identity]). An error matches [ErrNoModule] where the path leads to no
// file; a bad option is an [*OptionError].
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

// Capture binds an unbound guard (or one bound without Git) to the module
// at modulePath; a guard bound to a Git checkout checks it, refusing another.
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
			return readTimeout("runtimeguard: capture " + abs + ": the resolution of its path " + stuckWhy(stuck))
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

// Close releases the guard's inotify watches and ends [Guard.Watch]. It may
// be called more than once, and while checks run.
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

// bind reads the checkout that abs leads to until one read holds still: it
// succeeded, no file it depended on changed meanwhile, and HEAD does not
// name a missing branch while other refs exist (a branch being renamed). So
// a passing state never becomes the bound identity. It gives up after
// maxBindAttempts reads. Each read runs on the checkout's executor within
// ReadTimeout; ctx ends the pauses and the waits.
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
		rf, stuck := bounded.Submit(ctx, cfg.ux, nil, cfg.timeout, func(t *bounded.Task[*updater.ReceiptFiles]) {
			t.Val = cfg.listReceipts()
		}, nil)
		if stuck != nil {
			if stuck.Ctx != nil {
				return nil, stuck.Ctx
			}
			g.counts.readTimeouts.Add(1)
			return nil, readTimeout("the listing of the updater's receipts " + stuckWhy(stuck))
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

// EnsureCurrent returns a *[StaleError] once the bound checkout's HEAD is
// not the bound revision, the module path leads to another file, or the
// checkout cannot be read; else nil, as always for an unbound guard. A
// check sees every change made before it began, and waits for the file
// system at most [Options.ReadTimeout].
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

// Identity returns what the guard is bound to, or the zero Identity.
func (g *Guard) Identity() Identity {
	if g == nil {
		g = nilGuard()
	}
	if b := g.bound.Load(); b != nil {
		return b.id
	}
	return Identity{}
}

// Paths returns the paths the guard's options resolved to.
func (g *Guard) Paths() Paths {
	if g == nil {
		g = nilGuard()
	}
	return g.config().paths()
}

// Stats are a guard's counts since [New], for an operator's metrics: each
// only grows, and a snapshot costs a few atomic loads.
type Stats struct {
	// Checks counts the calls of [Guard.EnsureCurrent], and Stale the
	// stale answers.
	Checks uint64 `json:"checks"`
	Stale  uint64 `json:"stale"`
	// FullReads counts the full reads of the checkout, and
	// ReadTimeouts the calls that gave up waiting for the file system.
	FullReads    uint64 `json:"full_reads"`
	ReadTimeouts uint64 `json:"read_timeouts"`
	// Reloads counts the reloads a [Reloader] carried out, and
	// ReloadsAbandoned those it gave up.
	Reloads          uint64 `json:"reloads"`
	ReloadsAbandoned uint64 `json:"reloads_abandoned"`
}

// counters are a guard's counts; the checks' count is alone on its cache
// line, so that counting stays cheap from many cores.
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

// Observe reads the updater's files now, within [Options.ReadTimeout], and
// reports what it found.
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

// staleLogInterval is the least time between two logs of repeated stale
// checks: each says how many were refused since the one before.
const staleLogInterval = 10 * time.Second

// logStale logs a stale check of b: the first at Warn, later ones at Debug
// (only to a Logger of the options), at most one per cfg.staleLogEvery with
// the number refused since. A binding the guard no longer uses (a check
// that began before a Plan.Bind) logs nothing.
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

// logCurrentAgain logs, at Info, that b's checkout is back at the bound
// revision after a stale check was logged.
func (g *Guard) logCurrentAgain(cfg *config, b *binding) {
	if g.bound.Load() != b {
		return
	}
	cfg.log().Info("runtimeguard: the loaded runtime is current again", "revision", b.id.Revision, "stale_checks", b.staleCount.Load())
}

// withoutGit takes b, a binding of abs that no Git checkout identifies: an
// error matching ErrNotCheckout where the options expect a revision or
// require a checkout, else a guard of the install by its module file and
// build stamp, said once at Warn (not again when a Capture finds the same).
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
// checkout move (a new one after [Plan.Bind]).
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

// firstSignal is the change signal of the guard's first binding, made once,
// so that a Changed called before Capture and the binding Capture makes
// share it.
func (g *Guard) firstSignal() *signal { return loadSignal(&g.first) }

// Watch checks the checkout until ctx is done or the guard is closed, so
// that [Guard.Changed] is closed without a request: when the kernel reports
// a change, or else every interval, which must be positive. It returns
// ctx's error, or nil once the guard is closed.
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

// dirty reports whether b's snapshot must be read again before a check can
// answer from it: there is none, it is not watched, or an event touched
// what it depends on.
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

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func newSignal() *signal { return &signal{c: make(chan struct{})} }

// loadSignal returns the signal at p, making it where there is none yet.
func loadSignal(p *atomic.Pointer[signal]) *signal {
	if s := p.Load(); s != nil {
		return s
	}
	p.CompareAndSwap(nil, newSignal())
	return p.Load()
}

// signal is a channel closed once.
type signal struct {
	c    chan struct{}
	once sync.Once
}

func (s *signal) fire() { s.once.Do(func() { close(s.c) }) }

func (s *signal) fired() bool {
	select {
	case <-s.c:
		return true
	default:
		return false
	}
}
