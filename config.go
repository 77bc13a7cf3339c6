package runtimeguard

import (
	"cmp"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
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
	// a full hex object id, and the module must be in a tracked checkout
	// (otherwise New fails with [ErrNotCheckout]). Empty: the revision
	// HEAD has when New runs.
	ExpectRevision string
	// RequireCheckout makes binding to a module that is not tracked in a
	// Git checkout whose HEAD names a commit an error matching
	// [ErrNotCheckout], naming why, in [New] and [Guard.Capture]. False: the
	// guard binds inert, lets every check pass, says why in
	// [Observation].Unguarded and logs it once at Warn.
	RequireCheckout bool
	// ExpectReceipt is the ID ([Receipt].ID) of the receipt whose reload
	// plan started this process, for the new process of a handover: New
	// then also checks that the updater's files still show what the plan
	// proved (no update marker, no recovery marker, that receipt still the
	// newest), and fails with an error matching [ErrNotReady] otherwise.
	// It needs ExpectRevision. Empty: no such check.
	ExpectReceipt string
	// Layout is where the updater keeps its files. Zero: [HermesLayout].
	Layout Layout
	// HomeDir is the updater's home directory, which holds the files of
	// the Layout. Empty: the Layout's HomeEnv variable, else its
	// DefaultHome under the user's home directory, else unknown (and the
	// marker's state is then unknown).
	HomeDir string
	// Python is the agent's interpreter, as configured (not resolved).
	// When it lives in <root>/venv/bin or <root>/.venv/Scripts, <root> is
	// searched for recovery markers too. Empty: only the source directory.
	Python string
	// MaxMarkerAge is the age past which an update marker is stale.
	// Zero: [DefaultMaxMarkerAge]. Negative: an error.
	MaxMarkerAge time.Duration
	// AgentName and ServerName name the two products in the default
	// messages. Empty: "Hermes Agent" and "Hermes WebUI".
	AgentName, ServerName string
	// Message replaces the whole stale message, that of a checkout turned
	// into a repository format the guard does not read too. Empty: "<agent>
	// was updated on disk after <server> loaded it. Restart <server>
	// manually to load the new code.", and for an unsupported format a
	// message that says so (a restart would fail to bind it). No message
	// may contain "success", in any case and inside a word too
	// ("unsuccessful"): nothing here proves that an update succeeded, and a
	// client that searches a message for the string must not find it.
	Message string
	// ReloadMessage replaces the stale message while a reload is scheduled
	// (see [Reload.Schedule]). Empty: "<agent> was updated on disk after
	// <server> loaded it. <server> is reloading to load the new code;
	// retry shortly." It may not contain "success" either. While
	// a [Reloader] waits for an update to be proven finished, stale answers
	// say "<agent> was updated on disk after <server> loaded it. <server>
	// reloads by itself once the update is proven finished; retry
	// shortly." (ReloadMessage where both Message and ReloadMessage are
	// set).
	ReloadMessage string
	// ProblemDetails lets [Guard.Middleware] and [Guard.WriteStale] answer
	// with an RFC 9457 problem document when the request prefers
	// application/problem+json. False: always the JSON payload of
	// [Payload].
	ProblemDetails bool
	// AlwaysRead turns off the stat fast path: every check reads HEAD, the
	// refs and the index. Set it where file timestamps cannot be trusted,
	// such as network file systems with attribute caches or clock skew, or
	// where a writer may write the files without a file system call (a
	// shared mapping), which neither the watch path nor always the stat
	// path sees.
	AlwaysRead bool
	// NoWatch keeps the stat path where the watch path would be taken (see
	// [Observation].Check): every check stats the files the answer depends
	// on instead of asking one inotify descriptor.
	NoWatch bool
	// ReadTimeout bounds how long any call of the guard waits for the file
	// system: a check, for the stats or the full read of the checkout,
	// past which it fails closed with an error matching [ErrReadTimeout]
	// that names what it is blocked on, and, for a stale answer, for the
	// updater's files, past which the update state is unknown; a bind
	// ([New], [Guard.Capture], [Guard.Rebind]), a plan
	// ([Guard.PlanReload]) and a diagnostic ([Guard.Observe], [Observe]),
	// for each of their reads. Zero: [DefaultReadTimeout]. Negative: an
	// error.
	ReadTimeout time.Duration
	// Logger receives the guard's transitions: a guard inert at bind, at
	// Warn; the first stale check at Warn, later ones at Debug, at most
	// one line every ten seconds, with the number of checks refused since
	// the line before; a reload bound. Nil: slog.Default() receives them,
	// but for the Debug lines of repeated stale checks; so does a
	// [Reloader]'s reloads, done or abandoned.
	Logger *slog.Logger
	// OnStale, when set, is called with every stale answer that
	// [Guard.Middleware] and [Reloader.Wrap] write, before it is written:
	// to count, log, or start a reload. It must not write to the
	// response, and runs on the request's goroutine.
	OnStale func(r *http.Request, err *StaleError)
}

// DefaultMaxMarkerAge is the zero [Options.MaxMarkerAge]: an update marker
// older than this is stale whatever its process.
const DefaultMaxMarkerAge = 20 * time.Minute

// DefaultReadTimeout is the zero [Options.ReadTimeout]. A healthy full read
// takes milliseconds (about 8 ms for an index of 100,000 files, a few
// hundred for the largest index accepted), so five seconds is far beyond
// any read that will still return, and well within the time a client waits
// for an answer: a file system that hangs (a hard NFS mount that lost its
// server) turns into prompt 409s instead of requests that never end.
const DefaultReadTimeout = 5 * time.Second

// The product names of the default messages.
const (
	defaultAgentName  = "Hermes Agent"
	defaultServerName = "Hermes WebUI"
)

// config is Options resolved once, with every default applied: what a
// guard owns for its lifetime.
type config struct {
	env           *env
	homes         *updaterHomes // nil when no home directory is known
	markerRel     string        // Layout.Marker, Receipt and ReceiptHistory, native
	receiptRel    string
	historyRel    string
	markerPath    string // the marker in the guard's home; "" when no home directory is known
	receiptPath   string // the latest receipt in the guard's home; "" when the layout has none or no home is known
	lockPath      string // "" when the layout has no lock or no home is known
	checkoutLock  string // Layout.CheckoutLock
	link          string // Layout.Link, absolute
	noMarker      bool   // the layout has no Marker (it has a Link)
	recovery      []string
	python        string // Options.Python, absolute
	installRoot   string // the root of the install python's venv is in, or ""
	maxAge        time.Duration
	timeout       time.Duration
	message       string
	reloadMessage string
	autoMessage   string // while a Reloader waits for the proof of a reload
	problem       bool
	alwaysRead    bool
	logger        *slog.Logger
	onStale       func(*http.Request, *StaleError)
	staleLogEvery time.Duration // the least time between two Debug logs of stale checks
	expect        string        // ExpectRevision, lower case
	expectReceipt string
	// requireCheckout is Options.RequireCheckout.
	requireCheckout bool

	// unsupportedMessage is the stale message when the checkout turned
	// into a format the guard does not read: a restart would fail too.
	unsupportedMessage string
}

// resolve validates opts and applies its defaults.
func (opts *Options) resolve(e *env) (*config, error) {
	return opts.resolveOn(e, new(executor))
}

// resolveOn is resolve, with what it reads of the file system (the
// links of the home) run on x: a guard's executor for the updater's
// files.
func (opts *Options) resolveOn(e *env, x *executor) (*config, error) {
	if opts.MaxMarkerAge < 0 {
		return nil, optionError("Options.MaxMarkerAge", opts.MaxMarkerAge, "is negative")
	}
	if opts.ReadTimeout < 0 {
		return nil, optionError("Options.ReadTimeout", opts.ReadTimeout, "is negative")
	}
	layout := opts.Layout
	if layout.isZero() {
		layout = hermesLayout()
	}
	if err := layout.validate(); err != nil {
		return nil, err
	}
	ec := *e
	if opts.NoWatch {
		ec.watch = func() (*watch.Watcher, error) { return nil, errors.New("Options.NoWatch") }
	}
	u := *ec.upd // a cache of the guard's own receipts and marker
	u.Cache = new(updater.Cache)
	ec.upd = &u
	e = &ec
	c := &config{
		env:          e,
		recovery:     append([]string(nil), layout.RecoveryMarkers...),
		checkoutLock: layout.CheckoutLock,
		python:       opts.Python,
		maxAge:       cmp.Or(opts.MaxMarkerAge, DefaultMaxMarkerAge),
		timeout:      cmp.Or(opts.ReadTimeout, DefaultReadTimeout),
		problem:      opts.ProblemDetails,
		alwaysRead:   opts.AlwaysRead,
		logger:       opts.Logger,
		onStale:      opts.OnStale,

		staleLogEvery: staleLogInterval,
	}
	if c.python != "" {
		// Resolved now, once: a later chdir of the host's must not move it.
		abs, err := filepath.Abs(c.python)
		if err != nil {
			return nil, optionError("Options.Python", opts.Python, "cannot be made absolute: "+err.Error())
		}
		c.python = abs
		// The interpreter's install root, where it is in a venv: the
		// source directory alone is the rest of InstallRoots.
		if roots := updater.InstallRoots("", abs); len(roots) > 0 {
			c.installRoot = roots[0]
		}
	}
	c.noMarker = layout.Marker == ""
	if layout.Link != "" {
		abs, err := filepath.Abs(layout.Link)
		if err != nil {
			return nil, optionError("Layout.Link", layout.Link, "cannot be made absolute: "+err.Error())
		}
		c.link = abs
	}
	// A layout without a marker (one with a Link) keeps nothing in a home.
	if home := homeDir(opts.HomeDir, &layout); home != "" && layout.Marker != "" {
		abs, err := filepath.Abs(home)
		if err != nil {
			return nil, optionError("Options.HomeDir", home, "cannot be made absolute: "+err.Error())
		}
		home = abs
		c.homes = newUpdaterHomes(home, layout.Profiles, e.now, x, cmp.Or(opts.ReadTimeout, DefaultReadTimeout))
		c.markerRel = filepath.FromSlash(layout.Marker)
		c.receiptRel = filepath.FromSlash(layout.Receipt)
		c.historyRel = filepath.FromSlash(layout.ReceiptHistory)
		c.markerPath = filepath.Join(home, c.markerRel)
		if layout.Receipt != "" {
			c.receiptPath = filepath.Join(home, c.receiptRel)
		}
		if layout.Lock != "" {
			c.lockPath = filepath.Join(home, filepath.FromSlash(layout.Lock))
		}
	}
	agent, server := cmp.Or(opts.AgentName, defaultAgentName), cmp.Or(opts.ServerName, defaultServerName)
	c.message = cmp.Or(opts.Message, agent+" was updated on disk after "+server+
		" loaded it. Restart "+server+" manually to load the new code.")
	c.reloadMessage = cmp.Or(opts.ReloadMessage, agent+" was updated on disk after "+server+
		" loaded it. "+server+" is reloading to load the new code; retry shortly.")
	c.autoMessage = agent + " was updated on disk after " + server + " loaded it. " + server +
		" reloads by itself once the update is proven finished; retry shortly."
	if opts.Message != "" && opts.ReloadMessage != "" {
		c.autoMessage = c.reloadMessage
	}
	c.unsupportedMessage = cmp.Or(opts.Message, agent+"'s checkout changed on disk after "+server+
		" loaded it, to a Git repository format that is not supported, so a restart would fail too."+
		" Return the repository to a supported format, then restart "+server+" manually.")
	// The field a message with the word comes from: a message given
	// whole, else the product name in the default one.
	for _, f := range []struct{ name, value string }{
		{"Options.Message", opts.Message}, {"Options.ReloadMessage", opts.ReloadMessage},
		{"Options.AgentName", opts.AgentName}, {"Options.ServerName", opts.ServerName},
	} {
		if strings.Contains(strings.ToLower(f.value), "success") {
			return nil, optionError(f.name, f.value, "contains \"success\" (a client searching for it would find it): nothing here proves that an update succeeded")
		}
	}
	if r := opts.ExpectRevision; r != "" {
		if !gitread.IsRevision(r) {
			return nil, optionError("Options.ExpectRevision", r, "is not a full hex object id (40 or 64 hex digits)")
		}
		if opts.ModulePath == "" {
			return nil, optionError("Options.ExpectRevision", r, "needs a ModulePath")
		}
		c.expect = strings.ToLower(r)
	}
	if opts.ExpectReceipt != "" && opts.ExpectRevision == "" {
		return nil, optionError("Options.ExpectReceipt", opts.ExpectReceipt, "needs an ExpectRevision")
	}
	c.expectReceipt = opts.ExpectReceipt
	c.requireCheckout = opts.RequireCheckout
	return c, nil
}

// log is the logger of what an operator must know (a guard inert at
// bind, the first stale answer, a reload done or abandoned):
// [Options.Logger], or slog.Default() without one.
func (c *config) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	return slog.Default()
}

// homeDir is the updater's home directory: dir when set, else the layout's
// environment variable, else its default under the user's home directory.
func homeDir(dir string, l *Layout) string {
	if dir != "" {
		return dir
	}
	if l.HomeEnv != "" {
		if h := os.Getenv(l.HomeEnv); h != "" {
			return h
		}
	}
	if l.DefaultHome != "" {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, filepath.FromSlash(l.DefaultHome))
		}
	}
	return ""
}
