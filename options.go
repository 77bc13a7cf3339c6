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
	// guard binds to such an install without Git, by its module file and
	// build stamp (see [Identity]), says why Git does not identify it in
	// [Observation].Unguarded and logs it once at Warn. It needs
	// ModulePath: without one it is an [*OptionError].
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
	// MaxMarkerAge is the age past which an update marker is abandoned
	// ([MarkerAbandoned]).
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
	// (see [Plan.Schedule]). Empty: "<agent> was updated on disk after
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
	// Check chooses how a check proves an unchanged checkout unchanged,
	// in the words of [Observation].Check:
	//
	//   - "" or "watch": the watch path where the platform has one (Linux:
	//     one system call on an inotify descriptor), else the stat path;
	//   - "stat": the stat path (a stat of each file the answer depends
	//     on), never a watch;
	//   - "read": a full read of HEAD, the refs and the index on every
	//     check. Choose it where file timestamps cannot be trusted, such
	//     as network file systems with attribute caches or clock skew, or
	//     where a writer may write the files without a file system call (a
	//     shared mapping), which neither the watch path nor always the
	//     stat path sees.
	//
	// Any other word is an [*OptionError].
	Check string
	// ReadTimeout bounds how long any call of the guard waits for the file
	// system: a check, for the stats or the full read of the checkout,
	// past which it fails closed with an error matching [ErrReadTimeout]
	// that names what it is blocked on, and, for a stale answer, for the
	// updater's files, past which the update state is unknown; a bind
	// ([New], [Guard.Capture], [Plan.Bind]), a plan
	// ([Guard.PlanReload]) and a diagnostic ([Guard.Observe], [Observe]),
	// for each of their reads. Zero: [DefaultReadTimeout]. Negative: an
	// error.
	ReadTimeout time.Duration
	// Logger receives the guard's transitions: a guard bound without Git, at
	// Warn; the first stale check at Warn, later ones at Debug, at most
	// one line every ten seconds, with the number of checks refused since
	// the line before (stale_checks counts those of the binding, from one
	// again once the guard binds anew); a stale guard whose checkout came
	// back to the bound revision, once, at Info; a reload bound, in one
	// line at Info. Nil: slog.Default() receives them,
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
// older than this is abandoned whatever its process.
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

// resolveOn validates opts and applies its defaults, with what it reads
// of the file system (the links of the home) run on the executor of the
// updater's files (see updaterExecutor).
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
	c.updaterKey = home + "\x00" + c.link
	c.ux = c.updaterExecutor()
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

// Layout describes where an updater keeps the files a guard reads: its home
// directory, the marker it keeps while it runs, the recovery markers an
// interrupted update leaves in an install root, the receipt it writes after
// each run, and the lock file it holds while it runs; and the build stamp
// of an install without Git. Paths are relative to the home directory, but
// for the stamp's.
//
// The zero Layout is [HermesLayout]. Any other Layout is taken as it is: a
// field left empty means the updater has no such file.
type Layout struct {
	// HomeEnv names the environment variable that holds the home
	// directory, such as "HERMES_HOME". Empty: none.
	HomeEnv string
	// DefaultHome is the home directory, relative to the user's home
	// directory, when HomeEnv is unset or empty, such as ".hermes". Empty:
	// none, and without [Options.HomeDir] the home is unknown.
	DefaultHome string
	// Marker is the in-progress marker, relative to the home. Required,
	// unless Link is set.
	Marker string
	// RecoveryMarkers are the file names of the recovery markers an
	// interrupted update leaves in an install root.
	RecoveryMarkers []string
	// Receipt is the updater's latest receipt, relative to the home: the
	// file it rewrites after each run. Empty: none.
	Receipt string
	// ReceiptHistory names the receipts the updater keeps of each run,
	// relative to the home, its last element a pattern as [path.Match]
	// takes it, such as "logs/update_receipts/update_*.json". The newest
	// receipt of these and Receipt is the one that counts: an updater may
	// write its own run's file and leave an older run's latest receipt.
	// Empty: none. With neither Receipt nor ReceiptHistory, no reload is
	// ever planned.
	ReceiptHistory string
	// Lock is the lock file the updater holds while it runs, relative to
	// the home: a reload plan holds it shared (read access suffices) until
	// the new code is bound. It is never opened, created or truncated
	// through a link at its name. Empty: the updater takes none.
	Lock string
	// CheckoutLock is the file name of the kernel lock the updater holds
	// on the checkout it updates, for its whole process tree (its
	// children inherit it): in the checkout's common Git directory, or,
	// with a dot before it, in an install root without .git. While any
	// process holds it an update is in progress, whatever the marker
	// says. Empty: the updater takes none.
	CheckoutLock string
	// Profiles names the directory of a home that holds the homes of
	// named profiles, which share its install, such as "profiles". The
	// updater may run in any of them: a guard whose home is
	// <root>/<Profiles>/<name> or <root> reads the marker and the receipts
	// of <root> and of every profile home under it. Past 64 profile homes
	// (or a profiles directory that cannot be listed) none is read, and
	// the marker is unknown: a home that is not read may hold an update
	// in progress, so no reload is proven. Empty: only the guard's own
	// home.
	Profiles string
	// Stamp is the install's build stamp, relative to the module's
	// directory (links resolved), or to the directory StampDirEnv names:
	// where no Git checkout identifies the module, the build the stamp
	// names identifies the install, beside the module file itself (see
	// [Identity]). Its format is Hermes's install-stamp.json, which
	// Hermes's packagers write at build time (Docker, Nix, the desktop
	// app): a JSON object whose commit names the build. A stamp that is
	// missing, unreadable or malformed names no build, as to Hermes's own
	// reader. Empty: none; the module file alone identifies such an
	// install.
	Stamp string
	// StampDirEnv names the environment variable that, where it is set
	// and not empty when [New] runs, holds the directory of the Stamp in
	// place of the module's directory: for Hermes, HERMES_INSTALL_ROOT,
	// which its Nix wrapper and its desktop app set. Empty: none.
	StampDirEnv string
	// Link is the link an updater flips to publish a revision, as
	// git-sync does: <root>/<link> -> .worktrees/<hash>, the complete
	// worktree of <hash> checked out first (see [GitSyncLayout]). Where it
	// is set, a flip of it is the layout's only proof of a finished
	// update, in place of receipts: a flip made after the guard bound, to
	// a worktree named by the revision its HEAD is at and holding the
	// tracked module, proves a reload, once. The link stamped when the
	// guard bound proves nothing, whatever it leads to. Relative to the
	// working directory when not absolute. Empty: none.
	Link string

	// gitSync marks a layout of GitSyncLayout, whose Link must not be
	// empty: an empty one would read as the zero Layout, Hermes's.
	gitSync bool
}

// GitSyncLayout is the layout of kubernetes/git-sync (v4) publishing into
// the link at the path link (its --link, under its --root where
// relative): no home, marker, receipt, lock or build stamp (each worktree
// it publishes is a Git checkout), and a flip of the link proves the
// update (see [Layout].Link). A guard with it binds to the
// module through the link, such as <root>/<link>/run_agent.py.
//
// An empty link is an error of [New] (a git-sync deployment whose --link
// did not reach the server), not the zero Layout.
func GitSyncLayout(link string) Layout {
	return Layout{Link: link, gitSync: true}
}

// HermesLayout is the layout of the Hermes Agent's updater (hermes
// update), which the zero [Layout] stands for: home $HERMES_HOME or
// ~/.hermes, marker .hermes-update-in-progress, recovery markers
// .update-incomplete and .lazy-refresh-incomplete, receipts
// logs/update_receipts/latest.json and the retained
// logs/update_receipts/update_*.json, named profiles' homes under
// profiles, no lock file in the home, the checkout lock
// hermes-update.lock, and the build stamp install-stamp.json, in the
// install root: the module's directory (run_agent.py sits there, beside
// the hermes_cli package whose reader finds the stamp one directory up),
// or $HERMES_INSTALL_ROOT where set.
//
// Hermes's updater keeps the marker in the root of its homes ($HERMES_HOME,
// else ~/.hermes, less any profiles/<name>; older ones in the profile's
// home) and the receipts in the home of the profile it updates for, which
// may be <root>/profiles/<name>: so a guard reads both, wherever its own
// home is. Copy it to describe an
// updater that differs in a field; changing it changes nothing else (the
// zero Layout keeps meaning the Hermes layout).
var HermesLayout = hermesLayout()

// hermesLayout returns a fresh copy of the Hermes layout.
func hermesLayout() Layout {
	return Layout{
		HomeEnv:         "HERMES_HOME",
		DefaultHome:     ".hermes",
		Marker:          ".hermes-update-in-progress",
		RecoveryMarkers: []string{".update-incomplete", ".lazy-refresh-incomplete"},
		Receipt:         "logs/update_receipts/latest.json",
		ReceiptHistory:  "logs/update_receipts/update_*.json",
		CheckoutLock:    "hermes-update.lock",
		Profiles:        "profiles",
		Stamp:           "install-stamp.json",
		StampDirEnv:     "HERMES_INSTALL_ROOT",
	}
}

// isZero reports whether l is the zero Layout.
func (l *Layout) isZero() bool {
	return l.HomeEnv == "" && l.DefaultHome == "" && l.Marker == "" &&
		len(l.RecoveryMarkers) == 0 && l.Receipt == "" && l.ReceiptHistory == "" && l.Lock == "" && l.CheckoutLock == "" && l.Profiles == "" &&
		l.Stamp == "" && l.StampDirEnv == "" && l.Link == "" && !l.gitSync
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
	if l.StampDirEnv != "" && l.Stamp == "" {
		return optionError("Layout.StampDirEnv", l.StampDirEnv, "is set without a Stamp: it names the directory of the stamp")
	}
	if l.Marker == "" && l.Link == "" {
		return optionError("Layout.Marker", "", "is empty: a Layout other than the zero one is taken as it is; copy HermesLayout to change some of its fields")
	}
	for _, f := range []struct{ name, path string }{
		{"DefaultHome", l.DefaultHome}, {"Marker", l.Marker}, {"Receipt", l.Receipt},
		{"ReceiptHistory", l.ReceiptHistory}, {"Lock", l.Lock}, {"Profiles", l.Profiles}, {"Stamp", l.Stamp},
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

// Paths are the files and directories a guard's [Options] resolve to:
// resolved once, by [New], with every default applied
// and every path absolute, and used by everything the guard reads after.
// A later change of the working directory or of the environment moves
// none of them.
type Paths struct {
	// Home is the updater's home directory: [Options.HomeDir], else the
	// Layout's HomeEnv variable, else its DefaultHome under the user's home
	// directory. Empty when none is known, and so are Marker, Receipt,
	// ReceiptHistory and Lock.
	Home string `json:"home"`
	// Marker is the update marker in Home, where an updater that speaks
	// the protocol claims it. Where the layout has profiles, the markers
	// of the other homes are read too (see [Layout].Profiles).
	Marker string `json:"marker"`
	// Receipt is the updater's latest receipt in Home; empty when the
	// layout has none.
	Receipt string `json:"receipt,omitempty"`
	// ReceiptHistory is the pattern of the receipts the updater keeps of
	// each run, in Home; empty when the layout has none.
	ReceiptHistory string `json:"receipt_history,omitempty"`
	// Lock is the updater's lock file in Home; empty when the layout has
	// none.
	Lock string `json:"lock,omitempty"`
	// Python is [Options.Python], absolute (its links not resolved); empty
	// when none was given.
	Python string `json:"python,omitempty"`
	// InstallRoot is <root> for a Python at <root>/venv/bin (or .venv, or
	// Scripts): the install root searched for recovery markers beside the
	// module's source directory. Empty when Python is in no venv.
	InstallRoot string `json:"install_root,omitempty"`
	// RecoveryMarkers are the file names of the recovery markers searched
	// for in the install roots.
	RecoveryMarkers []string `json:"recovery_markers"`
}
