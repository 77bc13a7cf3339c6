package runtimeguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// ErrNotReady matches the error of a reload that is not proven safe, from
// [Guard.PlanReload], [Plan.Bind], or [New] with [Options.ExpectReceipt].
var ErrNotReady = errors.New("runtimeguard: no reload is proven safe")

// Plan is a reload that the updater's receipt proved safe. A host schedules
// it ([Plan.Schedule]), drains its guarded work, then loads the new code
// and binds to it ([Plan.Bind]) or starts a new process that binds to To; a
// host that does not go ahead calls [Plan.Release]. A Plan is safe for
// concurrent use.
type Plan struct {
	// From is the bound revision, To the new code's, Identity what the new
	// code will be bound to, and Receipt the receipt that proves the update.
	From, To string
	Identity Identity
	Receipt  Receipt

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

// PlanReload returns a plan to load the new code once the updater's files
// prove that the update that moved the checkout finished: the newest
// receipt is a success for HEAD's revision, and no update runs. Else its
// error matches [ErrNotReady] and says why (docs/reload.md lists every
// rule). It waits at most [Options.ReadTimeout], or until ctx is done.
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
	deadline := pieceDeadline(cfg.timeout)
	work := func(t *bounded.Task[planResult]) {
		t.Val.r, t.Val.err = g.lockAndPlan(ctx, cfg, b, deadline)
	}
	abandoned := func(t *bounded.Task[planResult]) {
		if r := t.Val.r; r != nil {
			if l := r.LockFile(); l != nil {
				at := "the release of the plan's lock " + l.Name()
				t.At.Store(&at)
			}
			r.Release() // no caller took the plan
		}
	}
	t, stuck := bounded.Submit(ctx, cfg.ux, nil, cfg.timeout, work, abandoned)
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

// planResult is what a plan's work on the file system returns.
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
		f, err := updater.Lock(cfg.homes.home, cfg.lockPath, false)
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

// plan reads the view and checks the conditions of PlanReload. Each try
// reads the install directories the module path leads to as it begins (a
// plan follows no check), and a try whose read finds the path leading
// elsewhere (a link flipped meanwhile) is tried again. The checkout is
// read on its executor, until deadline at the latest.
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
			return nil, notReady(awaited(&after, "the checkout cannot be read: "+r.err.Error()))
		}
		c := r.c
		unchanged, why := runWithin(b.x, deadline, func(t *bounded.Task[bool]) { t.Val = r.deps.Unchanged(cfg.env.git) })
		if why != "" {
			return nil, notReady(awaited(&after, fmt.Sprintf("the checkout %s was not read again: %s: %s", b.configured, why, classWords(ErrReadTimeout))))
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
		return awaited(o, "the module "+c.ModulePath+" is no longer tracked in the checkout "+c.TopLevel+": "+c.Reason)
	case c.Revision == "":
		return awaited(o, "HEAD names no revision: "+c.Reason)
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
	case o.worktree == "" && o.Receipt.Checkout == "" && o.Receipt.CheckoutID == "" && (o.installID == "" || o.installID != o.checkoutID):
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
// nothing of the checkout whose top level is top: it proves only the
// checkout the updater's installer puts in the homes, which top is not,
// or which cannot be told.
func receiptOfNoCheckout(o *Observation, top string) string {
	if o.installID == "" {
		if o.install == "" {
			return fmt.Sprintf("the receipt %s names no checkout, and %s: nothing proves this move of %s; restart to load it", o.ReceiptPath, o.installWhy, top)
		}
		return fmt.Sprintf("the receipt %s names no checkout: it proves only its home's installed checkout %s, which cannot be told from %s (%s); restart to load it", o.ReceiptPath, o.install, top, o.installWhy)
	}
	return fmt.Sprintf("the receipt %s names no checkout: it proves only its home's installed checkout %s, and the module is in %s, another directory: it may be another checkout's update; restart to load it", o.ReceiptPath, o.install, top)
}

// orNone is s, or "none".
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// pendingPrefix starts the reason of a plan refused for now, on a view that
// may turn into a proof by itself (an update still running, a receipt not
// yet written whole): a Reloader waits on such reasons.
const pendingPrefix = "not yet: "

func pending(why string) string { return pendingPrefix + why }

// awaited is why, a checkout that names no revision of the module: one
// an update that visibly runs may still move on (its marker active, the
// checkout lock held, or a running receipt whose writer lives), or else
// one that nothing will prove.
func awaited(o *Observation, why string) string {
	if o.Marker == MarkerActive || o.CheckoutLock == lockHeld ||
		o.Receipt != nil && o.Receipt.Outcome == updater.OutcomeRunning && o.writersGone == "" {
		return pending(why)
	}
	return why + "; no update is in progress: nothing proves this move of the checkout; restart to load it"
}

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
	case o.RecoveryProblem != "":
		return o.RecoveryProblem
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

// Schedule tells the guard that the host is carrying the plan out: stale
// answers then say a restart is scheduled, and the receipt is spent. After
// an error, the host must not go ahead.
func (p *Plan) Schedule() error {
	if p == nil || p.g == nil {
		return errors.New("runtimeguard: schedule: the plan was not made by Guard.PlanReload")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case planScheduled:
		return nil
	case planDone:
		return errors.New("runtimeguard: schedule: the plan was released or carried out")
	}
	if p.g.bound.Load() != p.b {
		return errors.New("runtimeguard: schedule: the guard was bound anew since the plan was made")
	}
	if err := p.b.plans.schedule(p); err != nil {
		return err
	}
	p.state = planScheduled
	return nil
}

// Release abandons the plan and releases the layout's lock. It is safe on a
// nil plan, more than once, and after [Plan.Bind]: defer it.
func (p *Plan) Release() {
	if p == nil {
		return // the plan PlanReload did not make
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = planDone
	if p.b != nil { // nil for a Plan that PlanReload did not make
		p.b.plans.unschedule(p)
	}
	if p.lock != nil {
		p.lock.Close()
		p.lock = nil
	}
}

// releaseUnused releases a plan whose attempt ended before the host loaded
// anything: a scheduled plan's receipt is unspent again, so that a new plan
// on it can carry the reload out.
func (p *Plan) releaseUnused() {
	p.mu.Lock()
	if p.state == planScheduled {
		p.b.plans.unspend(p.Receipt.ID)
	}
	p.mu.Unlock()
	p.Release()
}

// isDone reports whether the plan was released or carried out.
func (p *Plan) isDone() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == planDone
}

// LockFile returns the open file of the layout's lock that the plan holds,
// or nil, for a handover by exec to pass on.
func (p *Plan) LockFile() *os.File {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lock
}

// planLife is what the plans made on one binding did: the plan scheduled,
// if any, and the receipts spent, by ID. It lives as long as its binding:
// once the guard binds anew, what was spent on the old binding is forgotten
// (a receipt written before the new binding proves nothing to it anyway).
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

// Bind binds the guard to the new code once the host loaded it, provided
// the checkout is still at To and the updater's files still prove the plan.
// Otherwise the guard stays stale, and the error matches [ErrStale] or
// [ErrNotReady]. Either way the plan is done.
func (p *Plan) Bind(ctx context.Context) error {
	return p.bind(ctx, nil)
}

// bind is Bind, logging the reload to log (nil: the guard's logger, with
// the plan's revisions and receipt).
func (p *Plan) bind(ctx context.Context, log *slog.Logger) error {
	if p == nil || p.g == nil {
		return errors.New("runtimeguard: bind: the plan was not made by Guard.PlanReload")
	}
	g := p.g
	defer p.Release()
	if ctx == nil {
		return errNilContext("bind")
	}
	if p.isDone() {
		return errors.New("runtimeguard: bind: the plan was released or carried out")
	}
	cfg := g.config()
	if g.bound.Load() != p.b {
		return errors.New("runtimeguard: bind: the guard was bound anew since the plan was made")
	}
	// Nothing is read while the lock is held: Close never waits on a
	// file system.
	b, err := g.bind(ctx, cfg, p.b.configured)
	if err != nil {
		return fmt.Errorf("runtimeguard: bind %s: %w", p.b.configured, err)
	}
	if b.id.Revision != p.To || b.id.ModulePath != p.Identity.ModulePath {
		b.close()
		return classed(ErrStale, "runtimeguard: bind: the checkout is at %q (%s), not at the planned %s: %s",
			b.id.Revision, b.id.ModulePath, p.To, classWords(ErrStale))
	}
	// Without a lock, an update may have begun since the plan: a marker, a
	// recovery marker or another receipt says the code on disk may not be
	// what the plan proved.
	o := g.observeRead(ctx, cfg, b, receiptsSince(p.b.receiptsAt), false)
	if why := stillProven(&o, &p.Receipt); why != "" {
		b.close()
		return classed(ErrNotReady, "runtimeguard: bind: %s: %s", why, classWords(ErrNotReady))
	}
	g.bindMu.Lock()
	if g.bound.Load() != p.b {
		g.bindMu.Unlock()
		b.close()
		return errors.New("runtimeguard: bind: the guard was bound anew since the plan was made")
	}
	g.bound.Store(b)
	if g.closed.Load() {
		b.close()
	}
	g.bindMu.Unlock()
	p.b.close() // the old binding's watches
	p.b.replaced.fire()
	if log == nil {
		log = cfg.log().With("from", p.From, "to", p.To, "receipt", p.Receipt.ID)
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
