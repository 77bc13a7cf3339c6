package runtimeguard

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
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

	// ux runs the reads of the updater's files (those of every guard,
	// Observe and plan of c): see updaterExecutor.
	ux *bounded.Executor
}

// updaterExecutor is the process's executor of the reads of the
// updater's files (markers, receipts, the lock, plans): one per
// updater install, as its own files name it (the home, the layout's
// link), shared by every guard, diagnostic and plan of the process that
// reads it. What else such a read needs (the module path resolved, the
// recovery markers and checkout lock of each install root, the checkout a
// plan reads) runs on the executor of what it reads (see checkoutExecutor,
// rootExecutor),
// within the read's time: so a file system that stops answering holds one
// goroutine per directory of it that is read, whatever the number of
// calls, and slows only the guards that read it.
func updaterExecutor(home, link string) *bounded.Executor {
	return bounded.Shared("updater\x00"+home+"\x00"+link, panicError)
}

// checkoutExecutor is the process's executor of the looks at the
// checkout the configured module path abs leads to (stats, full reads,
// binds, the resolving of the path): one per directory of a module path,
// shared by every guard of the process that reads it.
func checkoutExecutor(abs string) *bounded.Executor {
	return bounded.Shared("checkout\x00"+filepath.Dir(abs), panicError)
}

// rootExecutor is the process's executor of the reads of the install
// root root (its recovery markers and checkout lock), shared by every
// guard of the process that reads it; not the checkout's, so that a look
// at the checkout that takes long holds up no read of the updater's
// files.
func rootExecutor(root string) *bounded.Executor {
	return bounded.Shared("root\x00"+root, panicError)
}

// pieceDeadline is the deadline of the reads that a piece makes on other
// executors (see runWithin), for a caller that waits for the piece at most
// timeout from now: a little before the caller gives up (by a tenth of
// timeout, at most 250ms), so that the piece answers it with what it read
// and says what it could not, rather than return just after it left.
func pieceDeadline(timeout time.Duration) time.Time {
	return time.Now().Add(timeout - min(timeout/10, 250*time.Millisecond))
}

// runWithin runs fn on x for a piece running on another executor, which
// needs what x reads, and waits for it until deadline at the latest; it
// returns the piece's value, or why it gave up.
func runWithin[T any](x *bounded.Executor, deadline time.Time, fn func(*bounded.Task[T])) (T, string) {
	var zero T
	left := time.Until(deadline)
	if left <= 0 {
		return zero, "no time was left"
	}
	t, stuck := bounded.Submit(context.Background(), x, nil, left, fn, nil)
	switch {
	case stuck != nil:
		return zero, stuckWhy(stuck)
	case t.Err != nil:
		return zero, t.Err.Error()
	}
	return t.Val, ""
}

// stuckWhy says why a caller gave up on a piece: what it waited for, and
// how long; or why none could start.
func stuckWhy(s *bounded.Stuck) string {
	if s.Full != "" {
		return "was not started: " + s.Full
	}
	if s.Ctx != nil {
		return "abandoned: " + s.Ctx.Error()
	}
	verb := "did not return within"
	if s.Before {
		verb = "has not returned in"
	}
	on := ""
	if s.At != "" {
		on = ", blocked on " + s.At
	}
	return fmt.Sprintf("%s %v%s", verb, s.Since.Round(time.Millisecond), on)
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

// env is the part of the environment a guard touches, replaceable per
// instance so that tests can run in parallel.
type env struct {
	now func() time.Time
	// git is the file system the checkout is read from.
	git *gitread.FS
	// upd reads the updater's files.
	upd *updater.Env
	// watch is the process's inotify watcher, or why there is none.
	watch func() (*watch.Watcher, error)
}

var systemEnv = &env{now: time.Now, git: gitread.System, upd: updater.System, watch: watch.Shared}
