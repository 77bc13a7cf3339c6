package runtimeguard

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
	// Logger receives the guard's transitions: the first stale check at
	// Warn, later ones at Debug. Nil: silent.
	Logger *slog.Logger
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
	g := &Guard{
		markerPath: opts.HomeDir,
		python:     opts.Python,
		maxAge:     opts.MaxMarkerAge,
		message:    opts.Message,
		problem:    opts.ProblemDetails,
		alwaysRead: opts.AlwaysRead,
		logger:     opts.Logger,
		env:        e,
	}
	if g.maxAge == 0 {
		g.maxAge = DefaultMaxMarkerAge
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
		if (len(r) != 40 && len(r) != 64) || !isObjectID(r, len(r)) {
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
	module, err := resolveModule(modulePath)
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(modulePath)
	b := newBinding(Identity{SourceDir: filepath.Dir(module), ModulePath: module}, abs)
	rev, err := b.fullRead(g.environment(), g.alwaysRead)
	if err != nil {
		return fmt.Errorf("runtimeguard: bind %s: %w", module, err)
	}
	b.id.Revision = rev
	if g.expect != "" {
		b.id.Revision, g.expect = g.expect, ""
	}
	g.bound.Store(b)
	return nil
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
	rev, err := b.current(g.environment(), g.alwaysRead)
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
	// linkDir is the module's directory as configured when it differs from
	// id.SourceDir through a symbolic link; linkInfo is what it led to at
	// binding. A link swapped to another checkout makes the runtime stale.
	linkDir  string
	linkInfo os.FileInfo

	snap atomic.Pointer[snapshot]

	mu      sync.Mutex // protects started, reading and last
	cond    sync.Cond
	started uint64      // full reads started so far
	reading bool        // a full read is running
	last    *readResult // the latest full read
}

// snapshot is the result of a full read with the stamps of every file it
// depends on. trusted is false when a stamp could hide a later change.
type snapshot struct {
	rev     string
	deps    []dep
	trusted bool
}

type readResult struct {
	seq uint64
	rev string
	err error
}

func newBinding(id Identity, configured string) *binding {
	b := &binding{id: id}
	b.cond.L = &b.mu
	if dir := filepath.Dir(configured); dir != id.SourceDir {
		// Remember what the configured directory leads to now: the source
		// directory through a linked parent, or a real directory holding
		// a linked module file.
		if fi, err := os.Stat(dir); err == nil {
			b.linkDir, b.linkInfo = dir, fi
		}
	}
	return b
}

// current returns the checkout's revision now: from the snapshot when a stat
// of each of its files proves nothing changed, else from a full read.
func (b *binding) current(e *env, alwaysRead bool) (string, error) {
	if s := b.snap.Load(); s != nil && s.trusted && !alwaysRead && b.linkHolds() && s.unchanged(e.stat) {
		return s.rev, nil
	}
	return b.fullRead(e, alwaysRead)
}

func (s *snapshot) unchanged(stat func(string) (stamp, error)) bool {
	for i := range s.deps {
		st, err := stat(s.deps[i].path)
		if err != nil || st != s.deps[i].st {
			return false
		}
	}
	return true
}

// linkHolds reports whether the configured module directory still names the
// bound source directory.
func (b *binding) linkHolds() bool {
	if b.linkDir == "" {
		return true
	}
	fi, err := os.Stat(b.linkDir)
	return err == nil && os.SameFile(fi, b.linkInfo)
}

// fullRead reads the checkout, sharing the read with concurrent callers only
// when it began after they arrived.
func (b *binding) fullRead(e *env, alwaysRead bool) (string, error) {
	b.mu.Lock()
	arrival := b.started
	for {
		if b.last != nil && b.last.seq > arrival {
			res := b.last
			b.mu.Unlock()
			return res.rev, res.err
		}
		if !b.reading {
			break
		}
		b.cond.Wait()
	}
	b.started++
	res := &readResult{seq: b.started}
	b.reading = true
	b.mu.Unlock()

	defer func() {
		b.mu.Lock()
		b.last = res
		b.reading = false
		b.cond.Broadcast()
		b.mu.Unlock()
	}()
	res.rev, res.err = b.read(e, alwaysRead)
	return res.rev, res.err
}

// read performs one full read and publishes its snapshot. A panic in the
// read becomes an error: the runtime is then stale, and the host lives on.
//
// The previous snapshot stays published while the read runs: it remains a
// valid proof for any check whose stats still match it.
func (b *binding) read(e *env, alwaysRead bool) (rev string, err error) {
	defer func() {
		if p := recover(); p != nil {
			rev, err = "", fmt.Errorf("read panicked: %v", p)
		}
	}()
	start := e.now().UnixNano()
	if !b.linkHolds() {
		return "", fmt.Errorf("%s no longer leads where it did at binding (%s)", b.linkDir, b.id.SourceDir)
	}
	r := reader{stat: e.stat}
	c, err := r.read(b.id.SourceDir, b.id.ModulePath)
	if err != nil {
		return "", err
	}
	s := &snapshot{rev: c.Revision, deps: r.deps, trusted: !alwaysRead}
	for _, d := range s.deps {
		if !d.st.settled(start) {
			s.trusted = false
			break
		}
	}
	b.snap.Store(s)
	return c.Revision, nil
}

// ErrStale matches every [StaleError] through errors.Is.
var ErrStale = errors.New("runtimeguard: the loaded runtime is stale")
