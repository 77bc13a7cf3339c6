package runtimeguard

import (
	"cmp"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// The product names of the default messages.
const (
	defaultAgentName  = "Hermes Agent"
	defaultServerName = "Hermes WebUI"
)

// config is Options resolved once, with every default applied: what a
// guard owns for its lifetime.
type config struct {
	env           *env
	homes         *updaterHomes  // nil when no home directory is known
	stamp         *gitread.Stamp // where an install's build stamp is (see Layout.Stamp)
	markerRel     string         // Layout.Marker, Receipt and ReceiptHistory, native
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
	check         checkMode // Options.Check
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

	// updaterKey names what the reads of the updater's files touch
	// besides the module's directory: the home, the interpreter's install
	// root, the link. See updaterExecutor.
	updaterKey string
	// ux runs the reads of the updater's files for the options' own
	// module path (those of an unbound guard, of Observe, the home's
	// links): see updaterExecutor.
	ux *bounded.Executor
}

// resolveOn validates opts and applies its defaults, with what it reads
// of the file system (the links of the home) run on the executor of the
// updater's files for opts.ModulePath (see updaterExecutor).
func (opts *Options) resolveOn(e *env) (*config, error) {
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
	switch checkMode(opts.Check) {
	case "", checkWatch, checkRead:
	case checkStat:
		ec.watch = func() (*watch.Watcher, error) { return nil, errors.New(`Options.Check is "stat"`) }
	default:
		return nil, optionError("Options.Check", opts.Check, `is none of "watch", "stat" and "read"`)
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
		check:        cmp.Or(checkMode(opts.Check), checkWatch),
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
	c.stamp = &gitread.Stamp{Name: filepath.FromSlash(layout.Stamp), Limit: updater.MaxStampBytes, Build: updater.ParseInstallStamp}
	if layout.Stamp != "" && layout.StampDirEnv != "" {
		if dir := os.Getenv(layout.StampDirEnv); dir != "" {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return nil, optionError("Layout.StampDirEnv", layout.StampDirEnv, "names a directory that cannot be made absolute: "+err.Error())
			}
			c.stamp.Dir = abs
		}
	}
	if layout.Link != "" {
		abs, err := filepath.Abs(layout.Link)
		if err != nil {
			return nil, optionError("Layout.Link", layout.Link, "cannot be made absolute: "+err.Error())
		}
		c.link = abs
	}
	// A layout without a marker (one with a Link) keeps nothing in a home.
	home := homeDir(opts.HomeDir, &layout)
	if home != "" && layout.Marker != "" {
		abs, err := filepath.Abs(home)
		if err != nil {
			return nil, optionError("Options.HomeDir", home, "cannot be made absolute: "+err.Error())
		}
		home = abs
	} else {
		home = ""
	}
	c.updaterKey = strings.Join([]string{home, c.installRoot, c.link}, "\x00")
	module := ""
	if opts.ModulePath != "" {
		module, _ = gitread.Abs(opts.ModulePath) // "" where it cannot be made absolute: Capture says why
	}
	c.ux = c.updaterExecutor(module)
	if home != "" {
		c.homes = newUpdaterHomes(home, layout.Profiles, e.now, c.ux, cmp.Or(opts.ReadTimeout, DefaultReadTimeout))
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
	if opts.RequireCheckout && opts.ModulePath == "" {
		return nil, optionError("Options.RequireCheckout", true, "needs a ModulePath: a guard that binds nothing at New requires nothing of a checkout")
	}
	c.requireCheckout = opts.RequireCheckout
	return c, nil
}

// updaterExecutor is the process's executor of the reads of the
// updater's files (markers, recovery markers, receipts, the checkout
// lock, plans) for a guard of c whose configured module path is abs (""
// for none): one per updater install, as what the reads touch names it
// (the home, the interpreter's install root, the link, the module's
// directory), shared by every guard, diagnostic and plan of the process
// that reads it. So a file system that stops answering holds one
// goroutine per install, whatever the number of calls, and slows only the
// guards that read it.
func (c *config) updaterExecutor(abs string) *bounded.Executor {
	dir := ""
	if abs != "" {
		dir = filepath.Dir(abs)
	}
	return bounded.Shared("updater\x00"+c.updaterKey+"\x00"+dir, panicError)
}

// checkoutExecutor is the process's executor of the looks at the
// checkout the configured module path abs leads to (stats, full reads,
// binds): one per directory of a module path, shared by every guard of
// the process that reads it, as updaterExecutor's are.
func checkoutExecutor(abs string) *bounded.Executor {
	return bounded.Shared("checkout\x00"+filepath.Dir(abs), panicError)
}

// log is the logger of what an operator must know (a guard bound without Git at
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

// paths returns the resolved paths, in a copy the caller may keep.
func (c *config) paths() Paths {
	p := Paths{
		Marker:          c.markerPath,
		Receipt:         c.receiptPath,
		Lock:            c.lockPath,
		Python:          c.python,
		InstallRoot:     c.installRoot,
		RecoveryMarkers: nonNil(slices.Clone(c.recovery)),
	}
	if c.homes != nil {
		p.Home = c.homes.home
		if c.historyRel != "" {
			p.ReceiptHistory = filepath.Join(p.Home, c.historyRel)
		}
	}
	return p
}

// installRoots are the directories searched for recovery markers for the
// installs whose source directories are srcs: each of them, then the
// interpreter's install root, once each.
func (c *config) installRoots(srcs ...string) []string {
	var roots []string
	for _, dir := range append(srcs, c.installRoot) {
		if dir == "" {
			continue
		}
		if dir = filepath.Clean(dir); !slices.Contains(roots, dir) {
			roots = append(roots, dir)
		}
	}
	return roots
}
