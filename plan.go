package runtimeguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// ErrNotReady matches the error of [Guard.PlanReload] when a reload is not
// proven safe, of [Plan.Bind] when the updater's files no longer show
// what the plan proved, and of [New] with [Options.ExpectReceipt] when
// they do not show it; the error says which condition failed.
var ErrNotReady = errors.New("runtimeguard: no reload is proven safe")

// Plan is a plan to load the new code, made by [Guard.PlanReload] only
// when the updater's receipt proves the update that moved the checkout
// succeeded and finished. A host acts on it in one of two ways:
//
//   - in process: it schedules the reload ([Plan.Schedule]), stops
//     admitting guarded work, drains what runs, restarts its workers, and
//     calls [Plan.Bind];
//   - in a new process: it schedules the reload, drains, and starts the new
//     process (re-executing itself, or exiting for its supervisor), which
//     binds with [Options.ExpectRevision] set to To.
//
// Either way, the new code's binding is the last check: if HEAD moved on
// meanwhile, it fails closed, and a later receipt allows a later reload.
// A host that does not go ahead calls [Plan.Release].
//
// A Plan is safe for concurrent use. Its life moves one way: made, then
// scheduled ([Plan.Schedule]), then done ([Plan.Release] or
// [Plan.Bind]); once Release or Plan.Bind has returned, the plan is not
// scheduled and cannot be, whatever ran beside them.
type Plan struct {
	// From is the revision the guard is bound to, To the one the new code
	// is at.
	From, To string
	// Identity is what the new code will be bound to.
	Identity Identity
	// Receipt is the updater's receipt that proves the update.
	Receipt Receipt

	g     *Guard
	b     *binding   // the binding the plan replaces
	mu    sync.Mutex // protects lock and state
	lock  *os.File   // the layout's lock, held shared until the new code is bound
	state planState
}

// planState is where a plan is in its life: made, scheduled, or done
// (released or carried out). It only moves forward.
type planState int

const (
	planMade planState = iota
	planScheduled
	planDone
)

// PlanReload proves that a reload is safe and returns the plan, or an error
// matching [ErrNotReady] that names the condition that failed. All of these
// must hold, read together from one steady view of the checkout and the
// updater's files:
//
//   - the guard is bound to a tracked checkout and is stale (a guard
//     bound to an install without Git only where the layout has a link,
//     whose flip proves the new code whatever the old was: a move of an
//     install without Git proves nothing by itself);
//   - HEAD now names a full revision;
//   - the newest receipt the updater wrote since the guard bound (its
//     latest receipt or one it retained of a run, judged by the files: a
//     receipt file that was there unchanged when the guard bound proves
//     nothing, whatever time it claims), of those that name this checkout
//     or none ([Receipt].Checkout: one that names another checkout is
//     passed over), is schema 1 with outcome "success", its
//     post_update.sha is HEAD now, and it claims to have finished after
//     the guard bound and not after now; one that names no checkout
//     proves only where the checkout's top-level directory lies inside
//     the root of the homes the receipts were read from (where Hermes's
//     installer puts its checkout);
//   - where the layout has a link ([Layout].Link), a flip of it made
//     since the guard bound stands for the receipt: it leads to the
//     worktree .worktrees/<hash> the module now is in, and <hash> is HEAD
//     now;
//   - no update marker is present (the marker is absent);
//   - no recovery marker is present, and every install root was searched:
//     the bound install's and, where the configured path now leads to
//     another directory, that one's;
//   - nothing of it changed while it was read;
//   - no earlier plan on the binding the guard has now was scheduled on
//     the same receipt (what earlier bindings spent is forgotten with
//     them).
//
// Where the layout has a lock file, the plan holds it shared from now until
// the new code is bound ([Plan.Bind]) or the plan is released, so that a
// cooperating updater cannot start meanwhile; a lock held by an updater is
// not ready. PlanReload creates the lock file if it is missing, and opens
// it for reading only (a lock file it may read but not write still takes
// the shared lock); a link at the lock's name is never opened, nor a file
// created where it leads: no plan.
//
// The plan's reads run on the guard's goroutine for the updater's files:
// PlanReload waits for them at most [Options.ReadTimeout] in all, or
// until ctx is done, and then returns an error (matching [ErrNotReady]
// for the timeout, ctx's error for ctx); a plan made after it gave up is
// released.
func (g *Guard) PlanReload(ctx context.Context) (*Plan, error) {
	if g == nil {
		g = nilGuard()
	}
	if ctx == nil {
		return nil, errNilContext("PlanReload")
	}
	cfg := g.config()
	b := g.bound.Load()
	if b == nil {
		return nil, notReady("the guard is not bound to a tracked checkout")
	}
	if !b.git() && cfg.link == "" {
		return nil, notReady("the guard is bound to an install without Git, by its " + b.by + ": nothing proves a move of it; restart to load it")
	}
	if b.plans.isScheduled() {
		return nil, notReady("a reload is scheduled already")
	}
	if b.receiptsAt == nil {
		return nil, notReady("the updater's layout has no receipt, or no home directory is known")
	}
	t, stuck := bounded.Submit(ctx, b.ux, nil, cfg.timeout, func(t *bounded.Task[planResult]) {
		t.Val.r, t.Val.err = g.lockAndPlan(ctx, cfg, b, time.Now().Add(cfg.timeout))
	}, func(t *bounded.Task[planResult]) {
		if r := t.Val.r; r != nil {
			if l := r.LockFile(); l != nil {
				at := "the release of the plan's lock " + l.Name()
				t.At.Store(&at)
			}
			r.Release() // no caller took the plan
		}
	})
	switch {
	case stuck != nil && stuck.Ctx != nil:
		return nil, stuck.Ctx
	case stuck != nil:
		g.counts.readTimeouts.Add(1)
		on := ""
		switch {
		case stuck.Full != "":
			return nil, notReady(pending(fmt.Sprintf("the reads of the updater's files and the checkout were not started: %s: %v", stuck.Full, ErrReadTimeout)))
		case stuck.At != "":
			on = ", blocked on " + stuck.At
		}
		// No duration in the reason: a Reloader logs it once, not at
		// every plan while the file system hangs.
		return nil, notReady(pending(fmt.Sprintf("the reads of the updater's files and the checkout did not return within %v%s: %v", cfg.timeout, on, ErrReadTimeout)))
	case t.Err != nil:
		return nil, fmt.Errorf("%w: %w", ErrNotReady, t.Err)
	}
	return t.Val.r, t.Val.err
}

// planResult is what a plan's piece of work on the file system returns.
type planResult struct {
	r   *Plan
	err error
}

// lockAndPlan takes the layout's lock, if any, and plans, reading what
// the plan needs outside the updater's files until deadline at the
// latest; the plan holds the lock.
func (g *Guard) lockAndPlan(ctx context.Context, cfg *config, b *binding, deadline time.Time) (*Plan, error) {
	var lock *os.File
	if cfg.lockPath != "" {
		f, err := updater.Lock(cfg.lockPath, false)
		if errors.Is(err, updater.ErrLocked) {
			return nil, notReady(pending("an update holds the lock " + cfg.lockPath))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
		}
		lock = f
	}
	r, err := g.plan(ctx, cfg, b, deadline)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	r.lock = lock
	return r, nil
}

// maxPlanReads bounds the reads of a view that keeps changing.
const maxPlanReads = 3

// plan reads the view and checks the conditions of PlanReload.
// The install directories are those the module path leads to as each try
// begins (a plan follows no check): a try whose read finds the path
// leading elsewhere, a link flipped meanwhile, is tried again. The
// checkout is read on its executor, until deadline at the latest.
func (g *Guard) plan(ctx context.Context, cfg *config, b *binding, deadline time.Time) (*Plan, error) {
	type read struct {
		c    gitread.Checkout
		deps gitread.Deps
		err  error
	}
	for try := 0; try < maxPlanReads; try++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		srcs := b.installDirsWithin(true, deadline)
		rr := receiptsSince(b.receiptsAt)
		before := cfg.observeAt(rr, deadline, srcs...)
		r, why := runWithin(b.x, deadline, func(t *bounded.Task[read]) {
			t.Val.c, t.Val.deps, t.Val.err = gitread.Read(cfg.env.git, b.configured, false)
		})
		if why != "" {
			r.err = fmt.Errorf("the read of %s %s: %s", b.configured, why, classWords(ErrReadTimeout))
		}
		after := cfg.observeAt(rr, deadline, srcs...)
		if r.err != nil {
			return nil, notReady(pending("the checkout cannot be read: " + r.err.Error()))
		}
		c := r.c
		unchanged, why := runWithin(b.x, deadline, func(t *bounded.Task[bool]) { t.Val = r.deps.Unchanged(cfg.env.git) })
		if why != "" {
			return nil, notReady(pending(fmt.Sprintf("the checkout %s was not read again: %s: %s", b.configured, why, classWords(ErrReadTimeout))))
		}
		if !unchanged || !sameObservation(&before, &after) || !slices.Contains(srcs, c.SourceDir) {
			continue
		}
		if why := g.unproven(b, &c, &after, cfg.env.now()); why != "" {
			return nil, notReady(why)
		}
		return &Plan{
			From:     b.id.Revision,
			To:       c.Revision,
			Identity: Identity{SourceDir: c.SourceDir, ModulePath: c.ModulePath, Revision: c.Revision},
			Receipt:  *after.Receipt,
			g:        g,
			b:        b,
		}, nil
	}
	return nil, notReady(pending(fmt.Sprintf("the checkout or the updater's files changed while they were read, %d times", maxPlanReads)))
}

// unproven says which condition of a safe reload the view fails, or ""
// when it holds them all.
func (g *Guard) unproven(b *binding, c *gitread.Checkout, o *Observation, now time.Time) string {
	switch {
	case c.Revision == "" && c.ModulePath != "" && !c.Tracked && c.TopLevel != "":
		return pending("the module " + c.ModulePath + " is no longer tracked in the checkout " + c.TopLevel + ": " + c.Reason)
	case c.Revision == "":
		return pending("HEAD names no revision: " + c.Reason)
	case c.Revision == b.id.Revision && c.ModulePath == b.id.ModulePath:
		return pending("the guard is not stale")
	case updaterBusy(o) != "":
		return updaterBusy(o)
	case o.Receipt == nil && o.ReceiptProblem != "":
		return pending(o.ReceiptProblem)
	case o.Receipt == nil && o.State == UpdateUnverified:
		// Nothing runs that could write one: the checkout moved by other
		// means (a plain git pull), and nothing will prove it.
		return "no update is in progress and no receipt was written since the guard bound at " +
			b.boundAt.UTC().Format(time.RFC3339Nano) + ": nothing proves this move of the checkout; restart to load it"
	case o.Receipt == nil:
		return pending("no receipt was written since the guard bound at " + b.boundAt.UTC().Format(time.RFC3339Nano))
	case o.worktree == "" && o.checkout != c.TopLevel:
		// The receipts were read for another checkout than the one read
		// beside them: the module path moved meanwhile.
		return pending(fmt.Sprintf("the receipts were read for the checkout %s, and the module is in %s", orNone(o.checkout), orNone(c.TopLevel)))
	case o.worktree == "" && o.Receipt.Checkout == "" && !within(o.homesRoot, c.TopLevel):
		return receiptOfNoCheckout(o, c.TopLevel)
	case o.Receipt.Outcome == updater.OutcomeRunning && o.writersGone != "":
		// No marker, the checkout lock free (updaterBusy said so), and
		// the processes that would finish it gone: it never will be.
		return "the receipt " + o.ReceiptPath + " says the update is running, but that update ended without finishing it: no update marker, the checkout lock free, and " +
			o.writersGone + "; nothing proves this move of the checkout: restart to load it"
	case o.Receipt.Outcome == updater.OutcomeRunning:
		return pending("the receipt " + o.ReceiptPath + " says the update is running")
	case o.Receipt.Outcome != updater.OutcomeSuccess:
		return fmt.Sprintf("the receipt's outcome is %q, not \"success\"", o.Receipt.Outcome)
	case o.Receipt.To == "":
		return fmt.Sprintf("the receipt %s names no revision after the update, and HEAD is at %s", o.ReceiptPath, c.Revision)
	case o.Receipt.To != c.Revision:
		return fmt.Sprintf("the receipt %s is for revision %s, and HEAD is at %s", o.ReceiptPath, o.Receipt.To, c.Revision)
	case o.worktree != "" && o.worktree != c.TopLevel:
		return fmt.Sprintf("the link %s leads to the worktree %s, and the module is in %s", o.ReceiptPath, o.worktree, c.TopLevel)
	// A flip's stamp, changed since the binding, is the proof that it came
	// after it: its clock is not read.
	case o.worktree == "" && o.Receipt.FinishedAt.After(now):
		// A receipt from the future would stay "after" every binding,
		// in this process and the next: never proof of this update.
		return fmt.Sprintf("the receipt finished at %s, in the future (now %s): a clock ahead, or a local time without a zone read as UTC",
			o.Receipt.FinishedAt.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	case o.worktree == "" && !o.Receipt.FinishedAt.After(b.boundAt):
		return fmt.Sprintf("the receipt finished at %s, not after the guard bound at %s",
			o.Receipt.FinishedAt.UTC().Format(time.RFC3339Nano), b.boundAt.UTC().Format(time.RFC3339Nano))
	case b.plans.spent(o.Receipt.ID):
		return "a reload was already scheduled on the receipt " + o.Receipt.ID
	}
	return ""
}

// receiptOfNoCheckout says why a receipt that names no checkout proves
// nothing of the checkout whose top level is top: top is not inside the
// homes' root, where the updater's own install lives, so it may be
// another checkout's update; or that root cannot be told.
func receiptOfNoCheckout(o *Observation, top string) string {
	if o.homesRoot == "" {
		return fmt.Sprintf("the receipt %s names no checkout, and whether %s is the homes' own cannot be told: %s", o.ReceiptPath, top, o.homesRootWhy)
	}
	return fmt.Sprintf("the receipt %s names no checkout, and %s is not inside %s, the root of the homes it was read from: it may be another checkout's update", o.ReceiptPath, top, o.homesRoot)
}

// within reports whether path lies inside the directory dir (both
// absolute, links resolved), not being dir itself.
func within(dir, path string) bool {
	if dir == "" || path == "" {
		return false
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && filepath.IsLocal(rel)
}

// orNone is s, or "none".
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// pendingPrefix starts the reasons of a plan refused for now, on a view
// that may change into a proof by itself (an update still running, a
// receipt not yet written or half written): a host that reloads by itself
// waits on them.
const pendingPrefix = "not yet: "

func pending(why string) string { return pendingPrefix + why }

// updaterBusy says what of an update is running or half done, or "".
func updaterBusy(o *Observation) string {
	switch {
	case o.Marker == MarkerActive:
		return pending(fmt.Sprintf("the update marker %s is %s (%s)", o.MarkerPath, o.Marker, o.MarkerReason))
	case o.CheckoutLock == lockHeld:
		return pending(fmt.Sprintf("the checkout lock %s is held (%s): a process of an update still runs", o.CheckoutLockPath, o.CheckoutLockReason))
	case o.Marker != MarkerAbsent:
		return fmt.Sprintf("the update marker %s is %s (%s)", o.MarkerPath, o.Marker, o.MarkerReason)
	case o.CheckoutLock == lockUnknown:
		return fmt.Sprintf("the checkout lock %s cannot be probed (%s)", o.CheckoutLockPath, o.CheckoutLockReason)
	case len(o.RecoveryMarkers) > 0:
		return "the recovery marker " + o.RecoveryMarkers[0] + " is present"
	case o.State == UpdateUnknown:
		return "an install root could not be searched for recovery markers"
	}
	return ""
}

// sameObservation reports whether two looks at the updater's files saw the
// same.
func sameObservation(a, b *Observation) bool {
	if a.Marker != b.Marker || a.MarkerReason != b.MarkerReason || a.State != b.State || a.CheckoutLock != b.CheckoutLock ||
		a.ReceiptProblem != b.ReceiptProblem || len(a.RecoveryMarkers) != len(b.RecoveryMarkers) || a.writersGone != b.writersGone {
		return false
	}
	if (a.Receipt == nil) != (b.Receipt == nil) || a.Receipt != nil && *a.Receipt != *b.Receipt {
		return false
	}
	return true
}

// notReadyError is an error matching ErrNotReady; pending marks a view
// that may turn into a proof by itself.
type notReadyError struct {
	why     string
	pending bool
}

func (e *notReadyError) Error() string        { return ErrNotReady.Error() + ": " + e.why }
func (e *notReadyError) Is(target error) bool { return target == ErrNotReady }

func notReady(why string) error {
	rest, pending := strings.CutPrefix(why, pendingPrefix)
	return &notReadyError{why: rest, pending: pending}
}

// isPending reports whether err is a plan refused for now only.
func isPending(err error) bool {
	var nr *notReadyError
	return errors.As(err, &nr) && nr.pending
}

// Schedule tells the guard that the host is carrying the plan out: from now
// on, until [Plan.Bind] or [Plan.Release], every stale answer says
// "restart_scheduled": true with [Options.ReloadMessage], which asks the
// client to retry shortly. The plan's receipt can allow no second reload
// of the code the guard is bound to: it is spent. At most one plan of a
// guard is scheduled at a time, and only on what the guard is bound to
// now: scheduling a second, one released or carried out, one made on a
// binding the guard no longer has (it was bound anew since, as by another
// plan's [Plan.Bind]), or one whose receipt another plan spent, is an
// error, and the host must not carry it out. Scheduling a scheduled plan
// again is a no-op.
func (r *Plan) Schedule() error {
	if r == nil || r.g == nil {
		return errors.New("runtimeguard: schedule: the plan was not made by Guard.PlanReload")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.state {
	case planScheduled:
		return nil
	case planDone:
		return errors.New("runtimeguard: schedule: the plan was released or carried out")
	}
	if r.g.bound.Load() != r.b {
		return errors.New("runtimeguard: schedule: the guard was bound anew since the plan was made")
	}
	if err := r.b.plans.schedule(r); err != nil {
		return err
	}
	r.state = planScheduled
	return nil
}

// Release abandons the plan: stale answers no longer say a restart is
// scheduled, and the layout's lock is released. It is safe to call more
// than once, after [Plan.Bind], concurrently with [Plan.Schedule], and
// on a nil plan (defer it right after [Guard.PlanReload], whatever that
// returned) or one that PlanReload did not make.
func (r *Plan) Release() {
	if r == nil {
		return // the plan PlanReload did not make
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = planDone
	if r.b != nil { // nil for a Plan that PlanReload did not make
		r.b.plans.unschedule(r)
	}
	if r.lock != nil {
		r.lock.Close()
		r.lock = nil
	}
}

// releaseUnused releases a plan that loaded nothing (its attempt ended
// before the host's restart or handover began): a scheduled plan's receipt
// is no longer spent, so that a new plan on it can carry the reload out.
func (r *Plan) releaseUnused() {
	r.mu.Lock()
	if r.state == planScheduled {
		r.b.plans.unspend(r.Receipt.ID)
	}
	r.mu.Unlock()
	r.Release()
}

// isDone reports whether the plan was released or carried out.
func (r *Plan) isDone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == planDone
}

// LockFile returns the open file that holds the layout's lock for the
// plan, or nil where the layout has none. A host that hands over to a new
// process by exec passes it on (clearing its close-on-exec flag); the new
// process closes it once it has bound, which releases the lock.
func (r *Plan) LockFile() *os.File {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lock
}

// planLife is what the plans made on one binding did: the one scheduled,
// if any, and the receipts spent, by ID. It lives as long as its binding:
// once the guard binds anew, what was spent on the old one is forgotten
// (a receipt written before the new binding proves nothing to it anyway).
// The zero planLife has neither.
type planLife struct {
	mu        sync.Mutex // protects scheduled and spentIDs
	scheduled *Plan
	spentIDs  []string
}

// isScheduled reports whether a plan on the binding is scheduled.
func (l *planLife) isScheduled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.scheduled != nil
}

// spent reports whether a plan scheduled on the binding spent the
// receipt id.
func (l *planLife) spent(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.spentIDs, id)
}

// schedule makes r the binding's scheduled plan, and spends its receipt,
// unless another plan is scheduled or spent it.
func (l *planLife) schedule(r *Plan) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.scheduled != nil:
		return errors.New("runtimeguard: schedule: another reload of this guard is scheduled")
	case slices.Contains(l.spentIDs, r.Receipt.ID):
		return errors.New("runtimeguard: schedule: a reload was already scheduled on the receipt " + r.Receipt.ID)
	}
	l.scheduled = r
	l.spentIDs = append(l.spentIDs, r.Receipt.ID)
	return nil
}

// unschedule ends r's schedule, where it is the binding's scheduled plan.
func (l *planLife) unschedule(r *Plan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.scheduled == r {
		l.scheduled = nil
	}
}

// unspend makes the receipt id unspent: its reload was not carried out.
func (l *planLife) unspend(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := slices.Index(l.spentIDs, id); i >= 0 {
		l.spentIDs = slices.Delete(l.spentIDs, i, i+1)
	}
}

// Bind binds the plan's guard to the plan's new code, for a host that
// reloaded it in this process, provided the checkout still is at To (the
// same steady read as New's) and the updater's files still say what the
// plan proved: no update marker, no recovery marker, and the plan's
// receipt still the newest written since the guard bound. Otherwise it
// returns an error (matching [ErrStale] for a checkout that moved,
// [ErrNotReady] for the updater's files, ctx's error when ctx ended the
// rereads of a moving checkout) and the guard stays bound to the old
// revision, and stale. Either way the plan is done: its lock is released
// and stale answers no longer say a restart is scheduled.
//
// Call it after the new code was loaded: a checkout that moved while it
// was loaded then fails here, and the guard stays stale.
func (r *Plan) Bind(ctx context.Context) error {
	return r.bind(ctx, nil)
}

// bind is Bind, logging the reload done to log (nil: the guard's logger,
// with the plan's revisions and receipt).
func (r *Plan) bind(ctx context.Context, log *slog.Logger) error {
	if r == nil || r.g == nil {
		return errors.New("runtimeguard: bind: the plan was not made by Guard.PlanReload")
	}
	g := r.g
	defer r.Release()
	if ctx == nil {
		return errNilContext("bind")
	}
	if r.isDone() {
		return errors.New("runtimeguard: bind: the plan was released or carried out")
	}
	cfg := g.config()
	if g.bound.Load() != r.b {
		return errors.New("runtimeguard: bind: the guard was bound anew since the plan was made")
	}
	// Nothing is read while the lock is held: Close never waits on a
	// file system.
	b, err := g.bind(ctx, cfg, r.b.configured)
	if err != nil {
		return fmt.Errorf("runtimeguard: bind %s: %w", r.b.configured, err)
	}
	if b.id.Revision != r.To || b.id.ModulePath != r.Identity.ModulePath {
		b.close()
		return classed(ErrStale, "runtimeguard: bind: the checkout is at %q (%s), not at the planned %s: %s",
			b.id.Revision, b.id.ModulePath, r.To, classWords(ErrStale))
	}
	// Without a lock, an update may have begun since the plan: a marker, a
	// recovery marker or another receipt says the code on disk may not be
	// what the plan proved.
	o := g.observeRead(ctx, cfg, b, receiptsSince(r.b.receiptsAt), false)
	if why := stillProven(&o, &r.Receipt); why != "" {
		b.close()
		return classed(ErrNotReady, "runtimeguard: bind: %s: %s", why, classWords(ErrNotReady))
	}
	g.bindMu.Lock()
	if g.bound.Load() != r.b {
		g.bindMu.Unlock()
		b.close()
		return errors.New("runtimeguard: bind: the guard was bound anew since the plan was made")
	}
	g.bound.Store(b)
	if g.closed.Load() {
		b.close()
	}
	g.bindMu.Unlock()
	r.b.close() // the old binding's watches
	r.b.replaced.fire()
	if log == nil {
		log = cfg.log().With("from", r.From, "to", r.To, "receipt", r.Receipt.ID)
	}
	log.Info("runtimeguard: reloaded")
	return nil
}

// stillProven says why o no longer shows what proved a plan on receipt,
// or "" when it does.
func stillProven(o *Observation, receipt *Receipt) string {
	if why := updaterBusy(o); why != "" {
		return strings.TrimPrefix(why, pendingPrefix)
	}
	if o.Receipt == nil || *o.Receipt != *receipt {
		if o.ReceiptProblem != "" {
			return o.ReceiptProblem
		}
		return "the newest receipt (" + o.ReceiptPath + ") is no longer the plan's"
	}
	return ""
}
