package runtimeguard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// Errors a host can tell apart with errors.Is. A repository format this
// package cannot read (a split index, an unknown extension, refs stored
// elsewhere) matches [errors.ErrUnsupported].
var (
	// ErrStale matches every [StaleError].
	ErrStale = errors.New("runtimeguard: the loaded runtime is stale")
	// ErrReadTimeout matches the error of a check that gave up waiting for
	// the file system (a stat or a full read of the checkout): see
	// [Options.ReadTimeout].
	ErrReadTimeout = errors.New("runtimeguard: read timed out")
	// ErrNoModule matches the error of binding to a module path that leads
	// to no file, or to a directory.
	ErrNoModule = errors.New("runtimeguard: the module path leads to no file")
	// ErrNotCheckout matches the error of New with an
	// [Options.ExpectRevision] or [Options.RequireCheckout] for a module
	// that is not in a tracked Git checkout (a guard that could never be
	// current), and the [StaleError].Err of a check that found the bound
	// checkout naming no revision any more.
	ErrNotCheckout = errors.New("runtimeguard: the module is not in a tracked Git checkout")
)

// classError is an error that also matches one of the package's classes.
type classError struct{ err, class error }

func (e *classError) Error() string   { return e.err.Error() }
func (e *classError) Unwrap() []error { return []error{e.err, e.class} }

// PanicError is a panic recovered from a read of the checkout: the check
// fails closed, and the host lives on.
type PanicError struct {
	// Value is the value the read panicked with.
	Value any
	// Stack is the goroutine's stack when it panicked.
	Stack []byte
}

// Error returns the panic's value and stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("runtimeguard: read panicked: %v\n\n%s", e.Value, e.Stack)
}

// Unwrap returns the value the read panicked with when it is an error,
// else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Identity is what a guard bound to: the checkout's source directory and
// module file (absolute, symbolic links resolved) and the revision of HEAD
// then. An empty Revision means the module is not in a tracked Git
// checkout whose HEAD names a commit: the guard is inert, lets every check
// pass, and [Observation].Unguarded says why ([Options.RequireCheckout]
// makes binding to it an error instead). An inert guard stays inert when
// the checkout later names a revision, since the code the server loaded
// came from none: a check does not bind it; [Guard.Capture], called once
// the host loaded the module again, does.
type Identity struct {
	// SourceDir is the directory that holds the module.
	SourceDir string `json:"source_dir"`
	// ModulePath is the module file.
	ModulePath string `json:"module_path"`
	// Revision is the full hex object id of HEAD at binding, or empty.
	Revision string `json:"revision"`
}

// Guard binds to the Git checkout a server loaded code from and tells, on
// every check, whether that checkout still is at the bound revision.
//
// Make one with [New]. The zero Guard is unbound, with the options of a
// zero [Options]; [Guard.Capture] can bind it.
//
// A Guard is safe for concurrent use by any number of goroutines, and any
// number of guards may live in one process. Concurrent checks of one guard
// share its binding's proof that no file changed, the look at the checkout
// in flight (one at a time: see [Guard.EnsureCurrent]) and the read of the
// updater's files of a stale answer; nothing they share is locked on the
// watch path.
type Guard struct {
	cfg  *config   // set by New, or once by the first use of a zero Guard
	once sync.Once // resolves cfg for the zero Guard

	bindMu     sync.Mutex // serializes Capture and Rebind
	bound      atomic.Pointer[binding]
	first      atomic.Pointer[signal] // the change signal of Capture's bindings
	staleSeen  atomic.Bool            // a stale check was logged since the last current one
	staleCount atomic.Uint64
	// staleLogged is when a stale check was last logged (Unix
	// nanoseconds), and staleUnlogged how many were refused since.
	staleLogged   atomic.Int64
	staleUnlogged atomic.Uint64

	unboundObs  flight[Observation] // the reads of the updater's files of an unbound guard
	unboundDiag flight[Observation] // and of its diagnostics
	closed      atomic.Bool         // set by Close
	closedSig   signal              // fired by Close; its channel made on first use
	closedOnce  sync.Once

	scheduled  atomic.Pointer[Reload] // the reload the host carries out, if any
	reloader   atomic.Bool            // a Reloader runs for the guard
	auto       atomic.Int32           // the Reloader's state: autoWaiting or autoRefused
	receiptsMu sync.Mutex             // protects spentIDs
	spentIDs   []string               // the receipts of scheduled reloads, by ID

	counts counters // see Stats
}

// New validates opts and, when opts.ModulePath is set, binds to it now. A
// module path that leads to no file is an error matching [ErrNoModule], and
// a checkout that cannot be read is an error. A module that is not tracked
// in a checkout whose HEAD names a commit makes an inert guard (see
// [Identity]), which says so: once at Warn in [Options.Logger], and in
// [Observation].Unguarded; with [Options.RequireCheckout], New fails with
// an error matching [ErrNotCheckout] instead. An option that describes no
// guard is an [*OptionError] naming the field.
func New(opts Options) (*Guard, error) {
	return newGuard(opts, systemEnv)
}

func newGuard(opts Options, e *env) (*Guard, error) {
	cfg, err := opts.resolve(e)
	if err != nil {
		return nil, err
	}
	g := &Guard{cfg: cfg}
	if opts.ModulePath != "" {
		if err := g.Capture(opts.ModulePath); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// config returns the guard's configuration: New's, or for the zero Guard
// that of a zero Options, resolved once on first use.
func (g *Guard) config() *config {
	g.once.Do(func() {
		if g.cfg == nil {
			var zero Options
			g.cfg, _ = zero.resolve(systemEnv) // the zero Options is valid
		}
	})
	return g.cfg
}

// Capture binds the guard to the checkout of the module at modulePath, the
// file the server actually loaded (never a configured discovery directory).
//
// While the guard knows a revision, Capture does not rebind: for the module
// it is bound to, it verifies exactly as [Guard.EnsureCurrent] does, and a
// failed read cannot erase or downgrade the known revision; for another
// module it is an error. An unbound guard, or one bound to a module outside
// any tracked checkout, binds anew.
func (g *Guard) Capture(modulePath string) error {
	cfg := g.config()
	g.bindMu.Lock()
	defer g.bindMu.Unlock()
	abs, err := gitread.Abs(modulePath)
	if err != nil {
		return fmt.Errorf("runtimeguard: %w", err)
	}
	if b := g.bound.Load(); b != nil && b.id.Revision != "" {
		if abs != b.configured { // the same path is verified as a check is, within ReadTimeout
			if mod, err := gitread.ResolvePath(abs); err != nil || mod != b.id.ModulePath {
				return fmt.Errorf("runtimeguard: capture %s: the guard is bound to %s at %s; a guard binds once", abs, b.configured, b.id.Revision)
			}
		}
		return g.EnsureCurrent()
	}
	b, err := g.bind(cfg, abs)
	if errors.Is(err, gitread.ErrNoModule) {
		err = &classError{err, ErrNoModule}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == abs {
			return fmt.Errorf("runtimeguard: %w", err)
		}
		return fmt.Errorf("runtimeguard: bind %s: %w", abs, err)
	}
	b.sig = g.firstSignal()
	if b.id.Revision == "" {
		if err := g.inert(cfg, b, abs); err != nil {
			b.close()
			return err
		}
	}
	if cfg.expect != "" {
		if len(cfg.expect) != len(b.id.Revision) {
			b.close()
			return optionError("Options.ExpectRevision", cfg.expect, fmt.Sprintf("has %d hex digits; the object ids of the repository of %s have %d", len(cfg.expect), abs, len(b.id.Revision)))
		}
		b.id.Revision = cfg.expect
	}
	if cfg.expectReceipt != "" {
		// The new process of a handover: an update begun since the plan
		// (a marker, a recovery marker, another receipt) means the code
		// on disk may not be what the plan proved.
		o := cfg.observeAt(newestReceipt, b.installDirs()...)
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
			return classed(ErrNotReady, "runtimeguard: bind %s with ExpectReceipt: %s: %s", abs, why, classWords(ErrNotReady))
		}
	}
	if old := g.bound.Swap(b); old != nil {
		old.close() // an inert binding replaced
		old.replaced.fire()
	}
	return nil
}

// Close releases what the guard holds in the kernel and ends its
// [Guard.Watch]: the inotify watches of its binding, now and for every
// binding it makes later. It is for hosts that make guards dynamically;
// a guard that is simply dropped releases them once the garbage collector
// finds it unreachable. Close is idempotent and safe while checks run:
// checks after it go on answering, each by a stat of the files the answer
// depends on (or a full read), never by a watch again.
//
// While it lives, a guard holds: on the watch path, inotify watches on the
// process's one inotify descriptor (shared by every guard and never
// closed), one per directory on the way to each file its answer depends
// on and one per such file, at most 256; while [Guard.Watch] runs, an
// epoll descriptor, an eventfd and a descriptor of /proc/self/mountinfo;
// while checks come, a parked goroutine for each kind of look (the
// checkout's, the updater's files', the diagnostic's), each ending one to
// two seconds after the last look of its kind; and, while a file system
// it reads does not answer, at most one goroutine blocked on the checkout
// and one on the updater's files.
func (g *Guard) Close() error {
	g.closed.Store(true)
	g.closedSignal().fire()
	g.bindMu.Lock() // a binding being made now is stored, then closed
	defer g.bindMu.Unlock()
	if b := g.bound.Load(); b != nil {
		b.close()
	}
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
// identity, least of all an inert one; a checkout that does not hold still
// for any of maxBindAttempts reads is an error.
func (g *Guard) bind(cfg *config, abs string) (*binding, error) {
	return g.bindCtx(context.Background(), cfg, abs)
}

// bindCtx is bind, its pauses ended by ctx.
func (g *Guard) bindCtx(ctx context.Context, cfg *config, abs string) (*binding, error) {
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
		b := newBinding(abs, e.now(), &g.closed)
		b.counts = &g.counts
		b.receiptsAt = cfg.listReceipts() // before the read: see binding.receiptsAt
		call, err := b.look(e, cfg.alwaysRead, cfg.timeout, true)
		if err == nil {
			err = call.val.err
		}
		switch {
		case err != nil && errors.Is(err, fsread.ErrChanged):
			moving = err
			b.close()
			continue
		case err != nil:
			b.close()
			return nil, err
		case call.val.checkout.Transient:
			moving = fmt.Errorf("HEAD names %s, which does not exist while other refs do (a branch being renamed or deleted, or an orphan branch)", call.val.checkout.Head)
			b.close()
			continue
		case !call.val.unchanged:
			moving = errors.New("the checkout changed while it was read")
			b.close()
			continue
		}
		c := call.val.checkout
		b.id = Identity{SourceDir: c.SourceDir, ModulePath: c.ModulePath, Revision: c.Revision}
		b.reason = c.Reason
		return b, nil
	}
	return nil, fmt.Errorf("the checkout did not hold still for any of %d reads: %w", maxBindAttempts, moving)
}

// EnsureCurrent returns nil when the guard is unbound or inert, or when the
// bound checkout's HEAD still is the bound revision and the configured
// module path still leads to the bound module. Otherwise it returns a
// *[StaleError]; any failure to read the revision counts as a change.
//
// A check sees every change that completed before it began: it never uses a
// result older than its own start. (Writes that reach a file without the
// kernel's notice, through Linux AIO or a shared mapping, are the
// exceptions: docs/checking.md in the repository lists them, and
// [Options.AlwaysRead] sees them all.) On an unchanged checkout it costs, on
// the watch path (Linux, see [Observation].Check), one non-blocking system
// call on the inotify descriptor and no allocation; on the stat path one
// stat of each file the answer depends on (HEAD, the branch's loose ref or
// packed-refs, the index, the config, and every link and directory on the
// way to the module); with [Options.AlwaysRead], a full read. When one
// changed, or a file is too recent for its timestamp to prove anything
// (Git's "racy" rule), it reads them again.
// The stats and reads run on a goroutine of their own, one at a time per
// binding: concurrent checks share one only when it began after they
// arrived, and wait for it at most [Options.ReadTimeout]. A stale answer
// reads the updater's files the same way, within the same bound; on the
// watch path, while an inotify watch of those files reports no change, it
// reads none of them again, and only judges what it read now (the marker's
// age, its process's liveness).
//
// A check answers for the checkout as it is: one that moved back to the
// bound revision is current again ([Guard.Changed] stays closed).
//
// EnsureCurrent never schedules, requests or performs a restart.
func (g *Guard) EnsureCurrent() error {
	g.counts.checks.Add(1)
	b := g.bound.Load()
	if b == nil || b.id.Revision == "" {
		return nil
	}
	cfg := g.config()
	rev, err := b.current(cfg.env, cfg.alwaysRead, cfg.timeout)
	if err == nil && rev == b.id.Revision {
		if g.staleSeen.Load() {
			g.staleSeen.Store(false)
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
	if r := g.scheduled.Load(); r != nil && r.b == b {
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
	if b := g.bound.Load(); b != nil {
		return b.id
	}
	return Identity{}
}

// Observe reads the updater's files now, as a stale check does, and reports
// everything it found: the marker, the recovery markers of the install
// roots, the newest receipt, and the update state they add up to.
func (g *Guard) Observe() Observation {
	cfg := g.config()
	b := g.bound.Load()
	o := g.observeRead(cfg, b, newestReceipt)
	switch {
	case b != nil && b.id.Revision != "":
		o.Check, o.CheckReason = b.path(cfg.alwaysRead)
	case b != nil:
		o.Unguarded = cmp.Or(b.reason, "HEAD names no commit")
	}
	return o
}

// Observe is [Guard.Observe] without a guard: it reads the updater's files
// for the install opts describe, its source directory being the directory
// of opts.ModulePath (links resolved as far as they lead), without reading
// the checkout. It serves a host that could not bind (New failed: the
// checkout could not be read, is moving, or the module is missing) and
// still wants to say what the updater is doing; its error is an
// [*OptionError], for options that describe no install, or a module path
// that cannot be made absolute.
func Observe(opts Options) (Observation, error) {
	cfg, err := opts.resolve(systemEnv)
	if err != nil {
		return Observation{}, err
	}
	src := ""
	if opts.ModulePath != "" {
		mod, err := gitread.ResolvePath(opts.ModulePath)
		if err != nil {
			// A module path that leads nowhere still names a directory
			// whose recovery markers may say why.
			if mod, err = gitread.Abs(opts.ModulePath); err != nil {
				return Observation{}, fmt.Errorf("runtimeguard: %w", err)
			}
		}
		src = filepath.Dir(mod)
	}
	return cfg.observeAt(newestReceipt, src), nil
}

// observe reads the updater's files for b (nil: for no source
// directory), as a stale answer needs them (the update state, no
// receipt), on a goroutine of its own, waiting for it at most
// ReadTimeout: past it the observation is unknown, with the reason. At
// most one such read per binding is in flight.
//
// Where the binding's cache vouches for what the last such read found
// (see staleCache), the answer comes from it, judged now, in the
// caller's goroutine.
func (g *Guard) observe(cfg *config, b *binding) Observation {
	if b != nil {
		if o, ok := b.cachedStale(cfg); ok {
			return o
		}
	}
	return g.observeRead(cfg, b, noReceipt)
}

// observeRead is observe, reading the receipt rr asks for: the stale
// answer's reads and the diagnostic's each have a flight of their own.
func (g *Guard) observeRead(cfg *config, b *binding, rr receiptRead) Observation {
	f, src := &g.unboundObs, ""
	if rr.read {
		f = &g.unboundDiag
	}
	if b != nil {
		f, src = &b.obs, b.id.SourceDir
		if rr.read {
			f = &b.diag
		}
	}
	c, stuck := f.do(cfg.timeout, func(c *call[Observation]) {
		defer func() {
			if p := recover(); p != nil {
				c.val = cfg.unknownObservation(fmt.Sprintf("reading the updater's files panicked: %v", p), src)
			}
		}()
		if b == nil {
			c.val = cfg.observeAt(rr, "")
			return
		}
		if !rr.read {
			c.val = cfg.observeStale(b)
			return
		}
		c.val = cfg.observeAt(rr, b.installDirs()...)
	})
	if stuck == nil {
		return c.val
	}
	verb := "did not return within"
	if stuck.before {
		verb = "has not returned in"
	}
	return cfg.unknownObservation(fmt.Sprintf("a read of the updater's files (the marker, the recovery markers of the install roots, the receipt) %s %v: %v", verb, stuck.since.Round(time.Millisecond), ErrReadTimeout), src)
}

// staleLogInterval is the least time between two logs of repeated stale
// checks: each says how many were refused since the one before.
const staleLogInterval = 10 * time.Second

// logStale logs a stale check of b: the first at Warn, later ones at
// Debug, at most one per cfg.staleLogEvery with the number refused since,
// none for a binding the guard no longer uses (a check that began before
// a Rebind). An update state that is unknown comes with its reason.
func (g *Guard) logStale(cfg *config, b *binding, se *StaleError, o *Observation) {
	if cfg.logger == nil || g.bound.Load() != b {
		return
	}
	n := g.staleCount.Add(1)
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
	if g.staleSeen.CompareAndSwap(false, true) {
		g.staleLogged.Store(now)
		g.staleUnlogged.Store(0)
		cfg.logger.Warn(msg, attrs...)
		return
	}
	g.staleUnlogged.Add(1)
	last := g.staleLogged.Load()
	if now-last < int64(cfg.staleLogEvery) || !g.staleLogged.CompareAndSwap(last, now) {
		return
	}
	attrs = append(attrs, "refused_since_last_log", g.staleUnlogged.Swap(0), "since", time.Duration(now-last).Round(time.Millisecond))
	cfg.logger.Debug(again, attrs...)
}

// env is the part of the environment a guard touches, replaceable per
// instance so that tests can run in parallel.
type env struct {
	now func() time.Time
	// git is the file system the checkout is read from.
	git *gitread.FS
	// upd reads the updater's files.
	upd *updater.Env
	// marker classifies the update markers.
	marker *markerEnv
	// watch is the process's inotify watcher, or why there is none.
	watch func() (*watch.Watcher, error)
}

var systemEnv = &env{now: time.Now, git: gitread.System, upd: updater.System, marker: systemMarkers, watch: watch.Shared}
