package runtimeguard

import (
	"sync/atomic"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/check"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// binding is one bound checkout: the engine's binding (its snapshot, its
// watch or stat path, its looks: see check.Binding) and what the guard
// keeps of it, the identity it bound to, the updater's files as they
// were then and its change signals.
type binding struct {
	*check.Binding

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

	// ux runs the reads of the updater's files for the binding (stale
	// answers, diagnostics, plans, the listing of the receipts): see
	// config.updaterExecutor. obs is the lane of the reads of a stale
	// answer on it, diag of a diagnostic's (Guard.Observe), which reads
	// the receipts too.
	ux   *check.Executor
	obs  check.Lane[Observation]
	diag check.Lane[Observation]
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
// then (see check.Binding.ReadModule): its install directories.
type answeredRead struct {
	at     time.Time
	module *string
	o      Observation
}

// newBinding returns a binding of the configured path abs, for a guard
// of cfg, that has read nothing yet: its looks run on the process's
// executor of that checkout, its reads of the updater's files on that of
// its install (see config.updaterExecutor), and they are counted in
// counts (nil for none); cfg.stamp says where the build stamp of an
// install without Git is.
func newBinding(cfg *config, abs string, boundAt time.Time, guardClosed *atomic.Bool, counts *counters) *binding {
	var reads, timeouts *atomic.Uint64
	if counts != nil {
		reads, timeouts = &counts.fullReads, &counts.readTimeouts
	}
	return &binding{
		Binding: check.NewBinding(checkoutExecutor(abs), abs, cfg.stamp, guardClosed, reads, timeouts, checkErrors),
		ux:      cfg.updaterExecutor(abs),
		boundAt: boundAt, sig: newSignal(), replaced: newSignal(),
	}
}

// checkErrors are the errors of a binding's looks, in the package's
// words and classes.
var checkErrors = check.Errors{
	Timeout: func(msg string) error {
		return classed(ErrReadTimeout, "%s: %s", msg, classWords(ErrReadTimeout))
	},
	NoRevision: noRevision,
	Panic: func(value any, stack []byte) error {
		return &PanicError{Value: value, Stack: stack}
	},
}

// installDirs are the source directories whose recovery markers count:
// see check.Binding.InstallDirs.
func (b *binding) installDirs(resolve bool) []string { return b.InstallDirs(b.id.SourceDir, resolve) }

// errElsewhere is a configured module path that now leads to another file
// than the one the guard bound to.
var errElsewhere = check.ErrElsewhere

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

// The words of Options.Check and Observation.Check.
const (
	checkWatch = check.Watch
	checkStat  = check.Stat
	checkRead  = check.Read
)

// Now is the time now (check.Env).
func (e *env) Now() time.Time { return e.now() }

// FS is the file system the checkout is read from (check.Env).
func (e *env) FS() *gitread.FS { return e.git }

// Watcher is the process's inotify watcher, or why there is none
// (check.Env).
func (e *env) Watcher() (*watch.Watcher, error) { return e.watch() }
