package runtimeguard

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
)

// Product names and the message built from them.
const (
	// DefaultAgentName names the program whose checkout is guarded.
	DefaultAgentName = "Hermes Agent"
	// DefaultServerName names the server that loaded it.
	DefaultServerName = "Hermes WebUI"
	// DefaultMessage is the stale message with the default product names.
	DefaultMessage = DefaultAgentName + " changed on disk after " + DefaultServerName +
		" loaded it. Restart " + DefaultServerName + " manually to load the new code."
)

// Options configures a [Guard]. The zero value of each field is its
// documented default.
type Options struct {
	// ModulePath is the module file the server actually loaded, such as
	// the run_agent.py a Python interpreter imported. Empty: the guard
	// starts unbound, and [Guard.Capture] binds it later.
	ModulePath string
	// ExpectRevision is the revision the module was loaded at, when the
	// host recorded it: the guard binds to it instead of reading HEAD, so a
	// move between loading the code and calling New is caught. It must be
	// a full hex object id. Empty: the revision HEAD has when New runs.
	ExpectRevision string
	// HomeDir holds the updater's in-progress marker ([MarkerName]).
	// Empty: $HERMES_HOME, or ~/.hermes (see [DefaultHomeDir]).
	HomeDir string
	// Python is the agent's interpreter, as configured (not resolved).
	// When it lives in <root>/venv/bin or <root>/.venv/Scripts, <root> is
	// searched for recovery markers too. Empty: only the source directory.
	Python string
	// MaxMarkerAge is the age past which an update marker is stale.
	// Zero: [DefaultMaxMarkerAge]. Negative: an error.
	MaxMarkerAge time.Duration
	// AgentName and ServerName name the two products in the default
	// message. Empty: [DefaultAgentName] and [DefaultServerName].
	AgentName, ServerName string
	// Message replaces the whole stale message. Empty: [DefaultMessage], or
	// its text with AgentName and ServerName. No message may contain the
	// word "success": nothing here proves that an update succeeded.
	Message string
	// ProblemDetails lets [Guard.Middleware] answer with an RFC 9457
	// problem document when the request prefers application/problem+json.
	// False: always the JSON payload of [Payload].
	ProblemDetails bool
	// AlwaysRead turns off the stat fast path: every check reads HEAD, the
	// refs and the index. Set it where file timestamps cannot be trusted,
	// such as network file systems with attribute caches or clock skew.
	AlwaysRead bool
	// ReadTimeout bounds how long a check waits for a full read of the
	// checkout that another check has in flight; past it the check fails
	// closed with an error matching [ErrReadTimeout]. Zero:
	// [DefaultReadTimeout]. Negative: an error.
	ReadTimeout time.Duration
	// Logger receives the guard's transitions: the first stale check at
	// Warn, later ones at Debug. Nil: silent.
	Logger *slog.Logger
}

// DefaultReadTimeout is the zero [Options.ReadTimeout]. A healthy full read
// takes milliseconds (about 8 ms for an index of 100,000 files, a few
// hundred for the largest index accepted), so five seconds is far beyond
// any read that will still return, and well within the time a client waits
// for an answer: a file system that hangs (a hard NFS mount that lost its
// server) turns into prompt 409s instead of requests that never end.
const DefaultReadTimeout = 5 * time.Second

// ErrReadTimeout matches the error of a check that gave up waiting for a
// full read of the checkout: see [Options.ReadTimeout].
var ErrReadTimeout = errors.New("runtimeguard: read timed out")

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

// DefaultHomeDir is the home directory of a zero [Options.HomeDir]:
// $HERMES_HOME when set, else .hermes in the user's home directory, else
// empty (and the marker's state is then unknown).
func DefaultHomeDir() string {
	if h := os.Getenv("HERMES_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".hermes")
	}
	return ""
}

// Identity is what a guard bound to: the checkout's source directory and
// module file (absolute, symbolic links resolved) and the revision of HEAD
// then. An empty Revision means the module is not in a tracked Git
// checkout, and the guard lets every check pass.
type Identity struct {
	// SourceDir is the directory that holds the module.
	SourceDir string
	// ModulePath is the module file.
	ModulePath string
	// Revision is the full hex object id of HEAD at binding, or empty.
	Revision string
}

// Guard binds to the Git checkout a server loaded code from and tells, on
// every check, whether that checkout still is at the bound revision.
//
// Make one with [New]. The zero Guard is an unbound guard with the default
// options, which [Guard.Capture] can bind.
//
// A Guard is safe for concurrent use by any number of goroutines, and any
// number of guards may live in one process. Checks share nothing with each
// other but a cached proof that no file changed (see [Guard.EnsureCurrent]).
type Guard struct {
	markerPath string
	python     string
	maxAge     time.Duration
	message    string
	problem    bool
	alwaysRead bool
	timeout    time.Duration
	logger     *slog.Logger
	env        *env
	expect     string // Options.ExpectRevision, for the first binding

	bindMu     sync.Mutex // serializes Capture
	bound      atomic.Pointer[binding]
	staleSeen  atomic.Bool // a stale check was logged since the last current one
	staleCount atomic.Uint64
}

// New validates opts and, when opts.ModulePath is set, binds to it now. A
// module path that does not exist, or a checkout that cannot be read, is an
// error: a guard never silently guards nothing.
func New(opts Options) (*Guard, error) {
	return newGuard(opts, systemEnv)
}

func newGuard(opts Options, e *env) (*Guard, error) {
	if opts.MaxMarkerAge < 0 {
		return nil, fmt.Errorf("runtimeguard: MaxMarkerAge %v is negative", opts.MaxMarkerAge)
	}
	if opts.ReadTimeout < 0 {
		return nil, fmt.Errorf("runtimeguard: ReadTimeout %v is negative", opts.ReadTimeout)
	}
	g := &Guard{
		markerPath: opts.HomeDir,
		python:     opts.Python,
		maxAge:     opts.MaxMarkerAge,
		message:    opts.Message,
		problem:    opts.ProblemDetails,
		alwaysRead: opts.AlwaysRead,
		timeout:    opts.ReadTimeout,
		logger:     opts.Logger,
		env:        e,
	}
	if g.maxAge == 0 {
		g.maxAge = DefaultMaxMarkerAge
	}
	if g.timeout == 0 {
		g.timeout = DefaultReadTimeout
	}
	if g.markerPath == "" {
		g.markerPath = DefaultHomeDir()
	}
	if g.markerPath != "" {
		g.markerPath = filepath.Join(g.markerPath, MarkerName)
	}
	if g.message == "" {
		agent, server := opts.AgentName, opts.ServerName
		if agent == "" {
			agent = DefaultAgentName
		}
		if server == "" {
			server = DefaultServerName
		}
		g.message = agent + " changed on disk after " + server +
			" loaded it. Restart " + server + " manually to load the new code."
	}
	if strings.Contains(strings.ToLower(g.message), "success") {
		return nil, fmt.Errorf("runtimeguard: stale message %q contains the word \"success\"", g.message)
	}
	if r := opts.ExpectRevision; r != "" {
		if !gitread.IsRevision(r) {
			return nil, fmt.Errorf("runtimeguard: ExpectRevision %q is not a full hex object id", r)
		}
		if opts.ModulePath == "" {
			return nil, errors.New("runtimeguard: ExpectRevision needs a ModulePath")
		}
		g.expect = strings.ToLower(r)
	}
	if opts.ModulePath != "" {
		if err := g.Capture(opts.ModulePath); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Capture binds the guard to the checkout of the module at modulePath, the
// file the server actually loaded (never a configured discovery directory).
//
// While the guard knows a revision, Capture does not rebind: it verifies,
// exactly as [Guard.EnsureCurrent] does, and a failed read then cannot erase
// or downgrade the known revision. An unbound guard, or one bound to a
// module outside any tracked checkout, binds anew.
func (g *Guard) Capture(modulePath string) error {
	g.bindMu.Lock()
	defer g.bindMu.Unlock()
	if b := g.bound.Load(); b != nil && b.id.Revision != "" {
		return g.EnsureCurrent()
	}
	abs, err := gitread.Abs(modulePath)
	if err != nil {
		return err
	}
	b, err := g.bind(abs)
	if err != nil {
		return fmt.Errorf("runtimeguard: bind %s: %w", abs, err)
	}
	if g.expect != "" {
		b.id.Revision, g.expect = g.expect, ""
	}
	g.bound.Store(b)
	return nil
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
// is settled: the read succeeded, no file it depended on changed while it
// ran, and HEAD does not name a branch that is missing while the
// repository has other refs. A transient state never becomes the bound
// identity, least of all an inert one; a checkout that does not settle
// within maxBindAttempts reads is an error.
func (g *Guard) bind(abs string) (*binding, error) {
	e := g.environment()
	backoff := time.Millisecond
	var unsettled error
	for attempt := 0; attempt < maxBindAttempts; attempt++ {
		if attempt > 0 {
			time.Sleep(backoff)
			backoff = min(2*backoff, maxBindBackoff)
		}
		b := &binding{configured: abs}
		call, err := b.fullRead(e, g.alwaysRead, g.readTimeoutOrDefault(), true)
		if err == nil {
			err = call.err
		}
		switch {
		case err != nil && errors.Is(err, gitread.ErrChanged):
			unsettled = err
			continue
		case err != nil:
			return nil, err
		case call.checkout.Unsettled:
			unsettled = fmt.Errorf("HEAD names %s, which does not exist while other refs do (a branch being renamed or deleted, or an orphan branch)", call.checkout.Head)
			continue
		case !call.snap.deps.Unchanged(e.git):
			unsettled = errors.New("the checkout changed while it was read")
			continue
		}
		c := call.checkout
		b.id = Identity{SourceDir: c.SourceDir, ModulePath: c.ModulePath, Revision: c.Revision}
		return b, nil
	}
	return nil, fmt.Errorf("the checkout did not settle in %d reads: %w", maxBindAttempts, unsettled)
}

// EnsureCurrent returns nil when the guard is unbound or inert, or when the
// bound checkout's HEAD still is the bound revision. Otherwise it returns a
// *[StaleError]; any failure to read the revision counts as a change.
//
// A check sees every change that completed before it began: it never uses a
// result older than its own start. On an unchanged checkout it costs one
// stat of each file the answer depends on (HEAD, the branch's loose ref or
// packed-refs, the index); when one changed, or a file is too recent for its
// timestamp to prove anything (Git's "racy" rule), it reads them again.
// Concurrent checks share such a read only when it began after they
// arrived.
//
// EnsureCurrent never schedules, requests or performs a restart.
func (g *Guard) EnsureCurrent() error {
	b := g.bound.Load()
	if b == nil || b.id.Revision == "" {
		return nil
	}
	rev, err := b.current(g.environment(), g.alwaysRead, g.readTimeoutOrDefault())
	if err == nil && rev == b.id.Revision {
		if g.staleSeen.Load() {
			g.staleSeen.Store(false)
		}
		return nil
	}
	se := &StaleError{
		Message:  g.staleMessage(),
		State:    g.updateState(b),
		Captured: b.id.Revision,
		Current:  rev,
		Err:      err,
	}
	g.logStale(se)
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

// UpdateState observes the updater now: its in-progress marker and the
// recovery markers of the install roots (SPEC section 5).
func (g *Guard) UpdateState() UpdateState {
	return g.updateState(g.bound.Load())
}

func (g *Guard) updateState(b *binding) UpdateState {
	return g.observe(b).State
}

// Observation is everything [Guard.Observe] looked at, for diagnostics.
type Observation struct {
	// MarkerPath is the update marker's path, empty when no home
	// directory is known.
	MarkerPath string
	// Marker is the marker's state.
	Marker MarkerState
	// InstallRoots are the directories searched for recovery markers.
	InstallRoots []string
	// RecoveryMarkers are the recovery markers found there.
	RecoveryMarkers []string
	// State is the update state they add up to.
	State UpdateState
}

// Observe reads the update marker and the recovery markers now and reports
// all of it; its State is what [Guard.UpdateState] returns.
func (g *Guard) Observe() Observation {
	return g.observe(g.bound.Load())
}

// ObserveAt is [Guard.Observe] for an install whose source directory is
// sourceDir, bound or not: for tools that inspect a checkout without
// binding to it.
func (g *Guard) ObserveAt(sourceDir string) Observation {
	return g.observeAt(sourceDir)
}

func (g *Guard) observe(b *binding) Observation {
	src := ""
	if b != nil {
		src = b.id.SourceDir
	}
	return g.observeAt(src)
}

func (g *Guard) observeAt(src string) Observation {
	markerPath, maxAge := g.markerPath, g.maxAge
	if g.env == nil { // the zero Guard: default options
		if home := DefaultHomeDir(); home != "" {
			markerPath = filepath.Join(home, MarkerName)
		}
		maxAge = DefaultMaxMarkerAge
	}
	return g.environment().observe(markerPath, maxAge, installRoots(src, g.python))
}

// environment is the guard's environment; the system's for the zero Guard.
func (g *Guard) environment() *env {
	if g.env == nil {
		return systemEnv
	}
	return g.env
}

// readTimeoutOrDefault is the configured read timeout; the default for
// the zero Guard.
func (g *Guard) readTimeoutOrDefault() time.Duration {
	if g.timeout == 0 {
		return DefaultReadTimeout
	}
	return g.timeout
}

// staleMessage is the configured message; the default for the zero Guard.
func (g *Guard) staleMessage() string {
	if g.message == "" {
		return DefaultMessage
	}
	return g.message
}

func (g *Guard) logStale(se *StaleError) {
	if g.logger == nil {
		return
	}
	n := g.staleCount.Add(1)
	if g.staleSeen.CompareAndSwap(false, true) {
		g.logger.Warn("runtimeguard: the loaded runtime is stale; restart manually", "stale", se, "stale_checks", n)
		return
	}
	g.logger.Debug("runtimeguard: stale runtime refused again", "stale", se, "stale_checks", n)
}

// binding is one bound checkout and the proof, kept between checks, that its
// files did not change.
type binding struct {
	id Identity
	// configured is the module path as configured, absolute and clean with
	// its links unresolved: every full read resolves it again, and a path
	// that now leads to another module file makes the runtime stale.
	configured string

	snap atomic.Pointer[snapshot]

	mu       sync.Mutex // protects started, inflight and last
	started  uint64     // full reads started so far
	inflight *readCall  // the full read running, if any
	last     *readCall  // the latest full read that returned
}

// snapshot is the result of a full read with the stamps of every file it
// depends on. trusted is false when a stamp could hide a later change.
type snapshot struct {
	rev     string
	deps    gitread.Deps
	trusted bool
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

// current returns the checkout's revision now: from the snapshot when a stat
// of each of its files proves nothing changed, else from a full read.
func (b *binding) current(e *env, alwaysRead bool, timeout time.Duration) (string, error) {
	if s := b.snap.Load(); s != nil && s.trusted && !alwaysRead && s.deps.Unchanged(e.git) {
		return s.rev, nil
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
	s := &snapshot{rev: c.Revision, deps: deps, trusted: !alwaysRead && deps.Settled(start)}
	b.snap.Store(s)
	call.rev, call.snap = c.Revision, s
}

// errElsewhere is a configured module path that now leads to another file
// than the one the guard bound to.
var errElsewhere = errors.New("the module path leads elsewhere")

// ErrStale matches every [StaleError] through errors.Is.
var ErrStale = errors.New("runtimeguard: the loaded runtime is stale")
