package runtimeguard

import (
	"cmp"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path"
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
	// ModulePath is the module file the server loaded. Empty: the
	// guard is unbound until [Guard.Capture].
	ModulePath string
	// ExpectRevision is the revision the module was loaded at, which the guard
	// binds to instead of HEAD's.
	ExpectRevision string
	// RequireCheckout refuses a module that no Git checkout tracks.
	RequireCheckout bool
	// ExpectReceipt is the [Receipt].ID of the plan that started this process.
	ExpectReceipt string
	// Layout says where the updater keeps its files. Zero: [HermesLayout].
	Layout Layout
	// HomeDir is the updater's home directory. Empty: as Layout says.
	HomeDir string
	// Python is the agent's interpreter; its venv is an install root.
	Python string
	// MaxMarkerAge is a marker's age limit. Zero: [DefaultMaxMarkerAge].
	MaxMarkerAge time.Duration
	// AgentName and ServerName name the products in the messages.
	// Empty: "Hermes Agent" and "Hermes WebUI".
	AgentName, ServerName string
	// Message replaces the stale message, and ReloadMessage the one
	// while a reload is scheduled. No message may say "success".
	Message       string
	ReloadMessage string
	// ProblemDetails answers with a [Problem] where a request prefers it.
	ProblemDetails bool
	// Check is how checks prove the checkout unchanged: "watch" (the
	// default), "stat", or "read" (for network file systems).
	Check string
	// ReadTimeout bounds each wait for the file system; past it, a
	// check fails closed. Zero: [DefaultReadTimeout].
	ReadTimeout time.Duration
	// Logger receives what an operator must know. Nil: slog.Default().
	Logger *slog.Logger
	// OnStale is called before each stale answer of [Guard.Middleware] and
	// [Reloader.Wrap], on the request's goroutine; it must not write.
	OnStale func(r *http.Request, err *StaleError)
}

// DefaultMaxMarkerAge is the default [Options.MaxMarkerAge].
const DefaultMaxMarkerAge = 20 * time.Minute

// DefaultReadTimeout is the default [Options.ReadTimeout].
const DefaultReadTimeout = 5 * time.Second

// The product names of the default messages.
const (
	defaultAgentName  = "Hermes Agent"
	defaultServerName = "Hermes WebUI"
)

// resolveOn validates opts and resolves them into a config, with every
// default applied. It reads the file system (the home's links, on the
// updater's executor) last, once every option is valid.
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
	home := homeDir(opts.HomeDir, &layout)
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
	if layout.Stamp != "" && layout.stampDirEnv != "" {
		if dir := os.Getenv(layout.stampDirEnv); dir != "" {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return nil, optionError("Layout.Stamp", layout.Stamp, "is read in $"+layout.stampDirEnv+", "+dir+", which cannot be made absolute: "+err.Error())
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
	if home != "" && layout.Marker != "" {
		abs, err := filepath.Abs(home)
		if err != nil {
			return nil, optionError("Options.HomeDir", home, "cannot be made absolute: "+err.Error())
		}
		home = abs
	} else {
		home = ""
	}
	if home != "" {
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
	// The file system is read last, once the options are valid.
	c.ux = updaterExecutor(home, c.link)
	if home != "" {
		c.homes = newUpdaterHomes(home, layout.Profiles, layout.Checkout, e.now, c.ux, c.timeout)
	}
	return c, nil
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

// Layout says where an updater keeps the files a guard reads, relative to
// its home (docs/updater.md in the repository has a table). The zero Layout
// is [HermesLayout]; in any other, an empty field means no such file.
type Layout struct {
	// HomeEnv names the variable that holds the home directory, and
	// DefaultHome is the home relative to the user's home directory.
	HomeEnv     string
	DefaultHome string
	// Marker is kept while the updater runs; required unless Link is set.
	Marker string
	// RecoveryMarkers are the files an interrupted update leaves.
	RecoveryMarkers []string
	// Receipt is written after each run, and ReceiptHistory is the
	// [path.Match] pattern of the receipts kept of each run.
	Receipt        string
	ReceiptHistory string
	// Lock is the lock file the updater holds while it runs.
	Lock string
	// CheckoutLock is the lock the updater holds on the checkout.
	CheckoutLock string
	// Profiles is the directory of the homes of named profiles.
	Profiles string
	// Stamp is the build stamp of an install without Git.
	Stamp string
	// Link is the link an updater flips to publish a revision.
	Link string
	// Checkout is the installer's checkout in a home: the only one a
	// receipt in that home that names no checkout proves.
	Checkout string

	// stampDirEnv names the environment variable that holds the directory
	// of the Stamp, where it is set and not empty when New runs:
	// HERMES_INSTALL_ROOT, which Hermes's Nix wrapper and desktop app set.
	stampDirEnv string
	// gitSync marks a layout of GitSyncLayout, whose Link must not be
	// empty: an empty one would read as the zero Layout, Hermes's.
	gitSync bool
}

// GitSyncLayout is the layout of kubernetes/git-sync (v4) publishing
// through the link at link, whose flip proves an update. An empty link is
// an error of [New].
func GitSyncLayout(link string) Layout {
	return Layout{Link: link, gitSync: true}
}

// HermesLayout is the layout of hermes update, the zero [Layout]'s.
var HermesLayout = hermesLayout()

// hermesLayout returns a fresh copy of the Hermes layout.
func hermesLayout() Layout {
	return Layout{
		HomeEnv:         "HERMES_HOME",
		DefaultHome:     ".hermes",
		Marker:          ".hermes-update-in-progress",
		RecoveryMarkers: []string{".update-incomplete", ".lazy-refresh-incomplete"},
		Receipt:         "logs/update_receipts/latest.json",
		ReceiptHistory:  "logs/update_receipts/" + updater.ReceiptHistoryPattern,
		CheckoutLock:    updater.HermesCheckoutLock,
		Profiles:        "profiles",
		Stamp:           "install-stamp.json",
		stampDirEnv:     "HERMES_INSTALL_ROOT",
		Checkout:        "hermes-agent",
	}
}

// isZero reports whether l is the zero Layout.
func (l *Layout) isZero() bool {
	return l.HomeEnv == "" && l.DefaultHome == "" && l.Marker == "" &&
		len(l.RecoveryMarkers) == 0 && l.Receipt == "" && l.ReceiptHistory == "" && l.Lock == "" && l.CheckoutLock == "" && l.Profiles == "" &&
		l.Stamp == "" && l.stampDirEnv == "" && l.Link == "" && l.Checkout == "" && !l.gitSync
}

// validate checks that every path stays inside the home and every recovery
// marker is a file name.
func (l *Layout) validate() error {
	if l.Link != "" && (l.Receipt != "" || l.ReceiptHistory != "") {
		return optionError("Layout.Link", l.Link, "is set with receipts: a flip of the link is the proof where there is one")
	}
	if l.gitSync && l.Link == "" {
		return optionError("Layout.Link", "", "is empty: GitSyncLayout needs the link git-sync publishes (its --link)")
	}
	if l.Marker == "" && l.Link == "" {
		return optionError("Layout.Marker", "", "is empty: a Layout other than the zero one is taken as it is; copy HermesLayout to change some of its fields")
	}
	for _, f := range []struct{ name, path string }{
		{"DefaultHome", l.DefaultHome}, {"Marker", l.Marker}, {"Receipt", l.Receipt},
		{"ReceiptHistory", l.ReceiptHistory}, {"Lock", l.Lock}, {"Profiles", l.Profiles}, {"Stamp", l.Stamp},
		{"Checkout", l.Checkout},
	} {
		if f.path != "" && !filepath.IsLocal(filepath.FromSlash(f.path)) {
			return optionError("Layout."+f.name, f.path, "is not a relative path that stays inside its directory")
		}
	}
	if l.ReceiptHistory != "" {
		if _, err := path.Match(path.Base(l.ReceiptHistory), ""); err != nil || strings.ContainsAny(path.Dir(l.ReceiptHistory), "*?[\\") {
			return optionError("Layout.ReceiptHistory", l.ReceiptHistory, "is not a directory and a file name pattern")
		}
	}
	if l.CheckoutLock != "" && (strings.ContainsAny(l.CheckoutLock, `/\`) || !filepath.IsLocal(l.CheckoutLock)) {
		return optionError("Layout.CheckoutLock", l.CheckoutLock, "is not a file name")
	}
	if l.Profiles != "" && strings.ContainsAny(l.Profiles, `/\`) {
		return optionError("Layout.Profiles", l.Profiles, "is not a directory name")
	}
	for _, name := range l.RecoveryMarkers {
		if name == "" || strings.ContainsAny(name, `/\`) || !filepath.IsLocal(name) {
			return optionError("Layout.RecoveryMarkers", name, "is not a file name")
		}
	}
	return nil
}

// Paths are the files and directories a guard's [Options] resolved to at
// [New]: absolute, with every default applied. A path is empty where none
// is known, or where the layout has no such file.
type Paths struct {
	// Home is the updater's home directory, which holds the Marker,
	// Receipt, ReceiptHistory (a pattern) and Lock.
	Home           string `json:"home"`
	Marker         string `json:"marker"`
	Receipt        string `json:"receipt,omitempty"`
	ReceiptHistory string `json:"receipt_history,omitempty"`
	Lock           string `json:"lock,omitempty"`
	// Python is [Options.Python] made absolute, and InstallRoot the
	// root of its venv.
	Python      string `json:"python,omitempty"`
	InstallRoot string `json:"install_root,omitempty"`
	// RecoveryMarkers are the names of the recovery markers.
	RecoveryMarkers []string `json:"recovery_markers"`
}
