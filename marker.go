package runtimeguard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// MarkerState is the state of the updater's in-progress marker: absent,
// active (younger than [Options.MaxMarkerAge], its process alive),
// abandoned (older, or its process gone) or unknown.
type MarkerState string

// The four marker states: see [MarkerState].
const (
	MarkerAbsent    MarkerState = "absent"
	MarkerActive    MarkerState = "active"
	MarkerAbandoned MarkerState = "stale"
	MarkerUnknown   MarkerState = "unknown"
)

// String returns the state's word.
func (s MarkerState) String() string { return string(s) }

// markerState is the marker state that the updater's verdict l stands for.
func markerState(l updater.Life) MarkerState {
	switch l {
	case updater.NoUpdate:
		return MarkerAbsent
	case updater.Live:
		return MarkerActive
	case updater.Ended:
		return MarkerAbandoned
	}
	return MarkerUnknown
}

// UpdateState is what a [StaleError] says of the updater, an observation
// and never a proof: unverified (no marker, no recovery marker), active
// (an update runs), stale (the marker is abandoned), unknown (something
// could not be read) or incomplete (a recovery marker is present).
type UpdateState string

// String returns the state's word.
func (s UpdateState) String() string { return string(s) }

// The five update states: see [UpdateState].
const (
	UpdateUnverified UpdateState = "unverified"
	UpdateActive     UpdateState = "active"
	UpdateAbandoned  UpdateState = "stale"
	UpdateUnknown    UpdateState = "unknown"
	UpdateIncomplete UpdateState = "incomplete"
)

// Observation is what one look at the updater's files found, for
// diagnostics. Its JSON keys are those of the command-line tool's status.
type Observation struct {
	// MarkerPath is the marker that counts, with its state and why.
	MarkerPath   string      `json:"marker_path"`
	Marker       MarkerState `json:"update_marker"`
	MarkerReason string      `json:"update_marker_reason,omitempty"`
	// InstallRoots are searched for RecoveryMarkers; RecoveryProblem says why one was not.
	InstallRoots    []string `json:"install_roots"`
	RecoveryMarkers []string `json:"recovery_markers"`
	RecoveryProblem string   `json:"recovery_problem,omitempty"`
	// State is the update state that these add up to.
	State UpdateState `json:"update_state"`
	// Receipt is the newest receipt, read from ReceiptPath;
	// ReceiptProblem says why none could be read.
	ReceiptPath    string   `json:"receipt_path,omitempty"`
	Receipt        *Receipt `json:"receipt,omitempty"`
	ReceiptProblem string   `json:"receipt_problem,omitempty"`
	// LockPath is the updater's lock file.
	LockPath string `json:"lock_path,omitempty"`
	// CheckoutLock is the state of the updater's lock on the checkout:
	// "free", "held" or "unknown", with its path and reason.
	CheckoutLockPath   string `json:"checkout_lock_path,omitempty"`
	CheckoutLock       string `json:"checkout_lock,omitempty"`
	CheckoutLockReason string `json:"checkout_lock_reason,omitempty"`
	// Check says how checks prove the checkout unchanged ("watch",
	// "stat" or "read"), and CheckReason why not by watching.
	Check       string `json:"check,omitempty"`
	CheckReason string `json:"check_reason,omitempty"`
	// IdentifiedBy says what identifies the install: "git", "build
	// stamp" or "file"; Unguarded says why Git does not.
	IdentifiedBy string `json:"identified_by,omitempty"`
	Unguarded    string `json:"unguarded,omitempty"`

	// worktree is the directory the layout's link leads to, links
	// resolved, where a flip of it is the Receipt.
	worktree string
	// writersGone says, for a running Receipt, that every process it
	// names as its writer is gone, and how that was told; "" otherwise.
	writersGone string
	// checkout is the top-level directory of the checkout the receipts
	// were read for, checkoutID its identity (receipts naming another
	// were passed over), and install the checkout of Layout.Checkout,
	// installID its identity, or why it cannot be told (installWhy).
	checkout, checkoutID, install, installID, installWhy string
}

// Receipt is what the updater wrote of one run: schema 1 of its receipt.
// Its JSON keys are those of the command-line tool's status.
type Receipt struct {
	// ID names what the receipt proves; a plan scheduled on it spends it.
	ID string `json:"id"`
	// UpdateID and CorrelationID name the run.
	UpdateID      string `json:"update_id,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Outcome is how the run ended, or "running"; only "success" proves.
	Outcome string `json:"outcome"`
	// From and To are the revisions before and after the run, and
	// StartedAt and FinishedAt when it began and ended.
	From       string    `json:"from,omitempty"`
	To         string    `json:"to,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Checkout is the checkout the run updated, if the receipt names it,
	// and CheckoutID its directory's identity (device and inode, file ID).
	Checkout   string `json:"checkout,omitempty"`
	CheckoutID string `json:"checkout_id,omitempty"`
}

// Observe is [Guard.Observe] for a host that could not bind: it reads the
// updater's files for the install of opts.ModulePath, not its checkout. Its
// error is an [*OptionError], or says why the path is not absolute.
func Observe(opts Options) (Observation, error) {
	cfg, err := opts.resolveOn(systemEnv)
	if err != nil {
		return Observation{}, err
	}
	src, abs := "", ""
	if opts.ModulePath != "" {
		abs, err = gitread.Abs(opts.ModulePath)
		if err != nil {
			return Observation{}, fmt.Errorf("runtimeguard: %w", err)
		}
		src = filepath.Dir(abs)
	}
	deadline := pieceDeadline(cfg.timeout)
	t, stuck := bounded.Submit(context.Background(), cfg.ux, nil, cfg.timeout, func(t *bounded.Task[Observation]) {
		dir := src
		if abs != "" {
			// A module path that leads nowhere still names a directory
			// whose recovery markers may say why. It is resolved on the
			// executor of its directory.
			if mod, _ := runWithin(checkoutExecutor(abs), deadline, func(t *bounded.Task[string]) {
				t.Val, _ = gitread.ResolvePath(abs)
			}); mod != "" {
				dir = filepath.Dir(mod)
			}
		}
		t.Val = cfg.observeAt(newestReceipt, deadline, dir)
	}, nil)
	cfg.env.upd.Cache.Close() // the options' guard lives no longer than the call
	if stuck != nil {
		return cfg.unknownObservation(readStuck(stuck), src), nil
	}
	if t.Err != nil {
		return cfg.unknownObservation("reading the updater's files ended: "+t.Err.Error(), src), nil
	}
	return t.Val, nil
}

// observe reads the updater's files for b as a stale answer needs them (the
// update state, no receipt), within ReadTimeout; past it the observation is
// unknown, with the reason. A read asked for within staleReuse of the last
// one, for the same module file, answers again: a server that answers only
// 409s reads the updater's files once per staleReuse, not once per request.
func (g *Guard) observe(cfg *config, b *binding) Observation {
	now, mod := time.Now(), b.readModule.Load()
	if a := b.answered.Load(); a != nil && mod != nil && a.module != nil && *a.module == *mod && now.Sub(a.at) < staleReuse {
		return a.o
	}
	o := g.observeRead(context.Background(), cfg, b, noReceipt, false)
	b.answered.Store(&answeredRead{at: now, module: mod, o: o})
	return o
}

// staleReuse is how long a stale answer's read of the updater's files
// answers the stale checks after it.
const staleReuse = 10 * time.Millisecond

// observeRead reads the updater's files for b (nil for an unbound guard),
// with the receipt rr asks for, on the updater's executor. Stale answers
// share one queued read, and diagnostics another. With resolve, the install
// directories are those the module path leads to now, for a caller that did
// not just look at the checkout (see binding.installDirsWithin).
func (g *Guard) observeRead(ctx context.Context, cfg *config, b *binding, rr receiptRead, resolve bool) Observation {
	x, l, src := cfg.ux, &g.unboundObs, "" // the updater's executor, for every binding of cfg
	if rr.read {
		l = &g.unboundDiag
	}
	if b != nil {
		l, src = &b.obs, b.id.SourceDir
		if rr.read {
			l = &b.diag
		}
	}
	if rr.since != nil {
		l = nil // a read of its own
	}
	deadline := pieceDeadline(cfg.timeout) // the first caller's, whose piece it is
	t, stuck := bounded.Submit(ctx, x, l, cfg.timeout, func(t *bounded.Task[Observation]) {
		defer func() {
			if p := recover(); p != nil {
				t.Val = cfg.unknownObservation(fmt.Sprintf("reading the updater's files panicked: %v", p), src)
			}
		}()
		if b == nil {
			t.Val = cfg.observeAt(rr, deadline, "")
			return
		}
		t.Val = cfg.observeAt(rr, deadline, b.installDirsWithin(resolve, deadline)...)
	}, nil)
	switch {
	case stuck != nil:
		return cfg.unknownObservation(readStuck(stuck), src)
	case t.Err != nil:
		return cfg.unknownObservation("reading the updater's files ended: "+t.Err.Error(), src)
	}
	return t.Val
}

// readStuck says why a read of the updater's files is unknown, for a caller
// that gave up waiting for it.
func readStuck(s *bounded.Stuck) string {
	if s.Ctx != nil {
		return "the read of the updater's files was abandoned: " + s.Ctx.Error()
	}
	return fmt.Sprintf("a read of the updater's files (the marker, the recovery markers of the install roots, the receipt) %s: %v", stuckWhy(s), ErrReadTimeout)
}

// receiptRead says which receipt a look at the updater's files reads: none
// (a stale answer needs only the update state), the newest, or the newest
// written since a listing.
type receiptRead struct {
	read  bool
	since *updater.ReceiptFiles
}

var (
	noReceipt     = receiptRead{}
	newestReceipt = receiptRead{read: true}
)

// receiptsSince reads the newest receipt written since the listing rf.
func receiptsSince(rf *updater.ReceiptFiles) receiptRead { return receiptRead{read: true, since: rf} }

// observeAt reads the updater's files for the installs whose source
// directories are srcs, and the receipt rr asks for. It runs on the
// executor of the updater's files; what it reads in each install root
// runs on that root's executor (see rootExecutor), waited for until
// deadline at the latest.
func (c *config) observeAt(rr receiptRead, deadline time.Time, srcs ...string) Observation {
	f := c.readStaleFacts(srcs, rr.read && c.link == "", deadline)
	o := c.staleObservation(&f)
	if !rr.read {
		return o
	}
	if c.link != "" {
		c.observeFlip(&o, rr.since)
		return o
	}
	if sources, missing := c.receiptSources(); len(sources) > 0 {
		rf := updater.ListReceipts(sources)
		if missing != "" && rf.Problem == "" {
			rf.Problem = missing // a home not read may hold a newer receipt
		}
		// The checkout the module path leads to now (the last install
		// directory): receipts that name another say nothing of it.
		o.checkout, o.checkoutID = f.checkout, f.checkoutID
		f, problem := c.env.upd.NewestReceipt(rf, rr.since, o.checkoutID)
		if f != nil {
			o.ReceiptPath = f.Path
			o.Receipt = receiptOf(&f.Receipt)
			if f.Checkout == "" && f.CheckoutID == "" {
				o.install, o.installID, o.installWhy = c.homes.installedFor(f.Path, c.receiptRel)
			}
			if f.Outcome == updater.OutcomeRunning {
				if gone, why := c.env.upd.WritersGone(&f.Receipt); gone {
					o.writersGone = why
				}
			}
		}
		o.ReceiptProblem = problem
	}
	return o
}

// receiptOf converts the updater package's receipt to the public one.
func receiptOf(r *updater.Receipt) *Receipt {
	return &Receipt{
		ID: r.ID, UpdateID: r.UpdateID, CorrelationID: r.CorrelationID, Outcome: r.Outcome,
		From: r.From, To: r.To, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Checkout: r.Checkout, CheckoutID: r.CheckoutID,
	}
}

// combine is the update state of a marker and the recovery markers: unknown
// for an unknown marker or an install root that could not be searched,
// incomplete for a recovery marker, else the marker's own state (absent
// reads as unverified).
func combine(marker MarkerState, incomplete, rootsRead bool) UpdateState {
	switch {
	case marker == MarkerUnknown || !rootsRead:
		return UpdateUnknown
	case incomplete:
		return UpdateIncomplete
	case marker == MarkerAbsent:
		return UpdateUnverified
	case marker == MarkerActive:
		return UpdateActive
	}
	return UpdateAbandoned
}

// listReceipts stamps the receipt files of every home, for a later look at
// what was written since.
func (c *config) listReceipts() *updater.ReceiptFiles {
	if c.link != "" {
		return c.stampLink()
	}
	srcs, missing := c.receiptSources()
	if len(srcs) == 0 {
		return nil
	}
	rf := updater.ListReceipts(srcs)
	if missing != "" && rf.Problem == "" {
		rf.Problem = missing
	}
	return &rf
}

// unknownObservation is what is known without reading the updater's
// files, for a read of them that did not return (or panicked): the paths,
// each state unknown, and why.
func (c *config) unknownObservation(why, src string) Observation {
	o := Observation{
		MarkerPath:      c.markerPath,
		Marker:          MarkerUnknown,
		MarkerReason:    why,
		InstallRoots:    nonNil(c.installRoots(src)),
		RecoveryMarkers: []string{},
		RecoveryProblem: why,
		State:           UpdateUnknown,
		ReceiptPath:     c.receiptPath,
		LockPath:        c.lockPath,
	}
	if c.receiptPath != "" {
		o.ReceiptProblem = why
	}
	return o
}

// nonNil is s, or an empty slice for nil, so that JSON says [] not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// staleFacts is what a stale answer's look at the updater's files found,
// before the rules that depend on the clock and on processes are applied:
// every home's marker, why not every home was read, the install roots with
// what each holds, and the checkout the module path leads to.
type staleFacts struct {
	markers  []updater.MarkerFacts // the guard's own home first; one of path "" when no home is known
	problem  string                // why not every home was read, or ""
	roots    []string
	locks    []probedLock // the checkout locks of the roots, probed
	lockWhy  string       // why a root's checkout lock cannot be found, or ""
	present  []string
	rootsWhy string // why not every install root was searched for recovery markers, or ""
	// checkout is the top-level directory of the checkout that holds the
	// last of the source directories (the directory the module path
	// leads to now), as git's discovery finds it, where it was asked
	// for; "" where none holds it or it cannot be read. checkoutID is its
	// identity (see updater.CheckoutID), "" where it cannot be read.
	checkout, checkoutID string
}

// readStaleFacts reads the updater's files for the installs whose source
// directories are srcs: each home's marker and the artifacts beside it,
// and what each install root holds (see rootFacts), on the root's
// executor, until deadline at the latest: a root not read makes the
// update state unknown. top asks for the checkout of the last of srcs.
func (c *config) readStaleFacts(srcs []string, top bool, deadline time.Time) staleFacts {
	f := staleFacts{roots: c.installRoots(srcs...)}
	last := ""
	if top && len(srcs) > 0 && srcs[len(srcs)-1] != "" {
		last = filepath.Clean(srcs[len(srcs)-1])
	}
	for _, root := range f.roots {
		r, why := runWithin(rootExecutor(root), deadline, func(t *bounded.Task[rootFacts]) {
			t.Val = c.readRoot(root, root == last)
		})
		if why != "" {
			why = "the install root " + root + " was not read: " + why + ": " + classWords(ErrReadTimeout)
			f.rootsWhy = cmp.Or(f.rootsWhy, why)
			if c.checkoutLock != "" {
				f.lockWhy = why
			}
			continue
		}
		f.present = append(f.present, r.present...)
		f.rootsWhy = cmp.Or(f.rootsWhy, r.why)
		if r.lockWhy != "" {
			f.lockWhy = r.lockWhy
		}
		for _, lk := range r.locks {
			if !slices.ContainsFunc(f.locks, func(o probedLock) bool { return o.path == lk.path }) {
				f.locks = append(f.locks, lk)
			}
		}
		if root == last {
			f.checkout, f.checkoutID = r.top, r.topID
		}
	}
	paths, problem := c.markerPaths()
	f.problem = problem
	if len(paths) == 0 {
		paths = []string{""}
	}
	for _, p := range paths {
		f.markers = append(f.markers, c.env.upd.ReadMarker(p))
	}
	return f
}

// rootFacts is what one install root holds: its recovery markers, and
// why they could not all be looked for ("" when they were); its checkout locks, probed, or why
// they cannot be found; and, where asked, the top-level directory of the
// checkout that holds it and that directory's identity.
type rootFacts struct {
	present    []string
	why        string
	locks      []probedLock
	lockWhy    string
	top, topID string
}

// readRoot reads what the install root root holds, top included where
// asked for.
func (c *config) readRoot(root string, top bool) rootFacts {
	var r rootFacts
	locks, why := c.checkoutLocks(root)
	r.lockWhy = why
	for _, lk := range locks {
		state, why := updater.ProbeCheckoutLock(lk.path, lk.follow)
		r.locks = append(r.locks, probedLock{lk, state, why})
	}
	var err error
	if r.present, err = updater.RecoveryMarkers([]string{root}, c.recovery); err != nil {
		r.why = "the install root " + root + " cannot be searched: " + err.Error()
	}
	if top {
		if l, err := gitread.Locate(root); err == nil {
			r.top = l.TopLevel
			r.topID, _ = updater.CheckoutID(l.TopLevel)
		}
	}
	return r
}

// judgeMarkers classifies the markers of f now and returns the one that
// counts, with its path: the guard's own, unless another home's says more
// that an update may run.
func (c *config) judgeMarkers(f *staleFacts) (updater.Verdict, string) {
	if c.noMarker {
		return updater.Verdict{Life: updater.NoUpdate, Reason: "the updater's layout has no update marker"}, ""
	}
	// Of several homes' markers, the one that says the most that an
	// update may be under way counts (updater.Life is ordered so).
	best, bestPath := c.env.upd.JudgeMarker(&f.markers[0], c.maxAge), f.markers[0].Path
	for i := 1; i < len(f.markers) && best.Life != updater.Live; i++ {
		if m := c.env.upd.JudgeMarker(&f.markers[i], c.maxAge); m.Life > best.Life {
			best, bestPath = m, f.markers[i].Path
		}
	}
	if f.problem != "" && best.Life < updater.Unsure {
		// A home not read may hold an active marker.
		return updater.Verdict{Life: updater.Unsure, Reason: f.problem}, bestPath
	}
	return best, bestPath
}

// staleObservation is the observation that the facts f add up to now, with
// no receipt.
func (c *config) staleObservation(f *staleFacts) Observation {
	m, mpath := c.judgeMarkers(f)
	o := Observation{
		MarkerPath:      mpath,
		Marker:          markerState(m.Life),
		MarkerReason:    m.Reason,
		InstallRoots:    nonNil(f.roots),
		RecoveryMarkers: nonNil(f.present),
		RecoveryProblem: f.rootsWhy,
		State:           combine(markerState(m.Life), len(f.present) > 0, f.rootsWhy == ""),
		ReceiptPath:     c.receiptPath,
		LockPath:        c.lockPath,
	}
	probedCheckoutLocks(&o, f.locks, f.lockWhy)
	return o
}

// The states of the updater's checkout lock in an [Observation].
const (
	lockFree    = "free"    // no process holds it, or it has no file
	lockHeld    = "held"    // a process holds it: an update runs
	lockUnknown = "unknown" // this platform cannot tell
)

// checkoutLock is a checkout lock to probe: its path, and whether a link at
// its name is followed, as the updater follows it on its own path (see
// updater.CheckoutLockPaths).
type checkoutLock struct {
	path   string
	follow bool
}

// checkoutLocks are the checkout locks of the install root (see
// updater.FindCheckoutLock: git's, and Hermes's own where it differs), and
// why they cannot be found; none for a layout without one.
func (c *config) checkoutLocks(root string) (locks []checkoutLock, problem string) {
	if c.checkoutLock == "" {
		return nil, ""
	}
	l, err := updater.FindCheckoutLock(root, c.checkoutLock)
	if err != nil {
		problem = "the checkout lock of " + root + " cannot be found: " + err.Error()
	}
	for _, lk := range []checkoutLock{{l.Path, false}, {l.Also, true}} {
		if lk.path != "" {
			locks = append(locks, lk)
		}
	}
	return locks, problem
}

// probedLock is a checkout lock and what a probe of it found.
type probedLock struct {
	checkoutLock
	state updater.LockState
	why   string
}

// probedCheckoutLocks sets in o the first of the probed locks that is held
// (else the first unknown, else the first), with its state and why. A held
// lock makes the update active; one that cannot be probed makes it unknown,
// unless it is active. A lock that cannot be found (git cannot read the
// repository, so no updater that runs git updates it) is unknown and plans
// nothing, but leaves the update state to the markers. The locks are probed
// on every look: whether a process holds one changes with no change of any
// file.
func probedCheckoutLocks(o *Observation, locks []probedLock, problem string) {
	if problem != "" {
		o.CheckoutLock, o.CheckoutLockReason = lockUnknown, problem
	}
	for i, lk := range locks {
		word := map[updater.LockState]string{updater.LockFree: lockFree, updater.LockHeld: lockHeld, updater.LockUnknown: lockUnknown}[lk.state]
		if i == 0 && problem == "" || word == lockHeld || word == lockUnknown && o.CheckoutLock == lockFree {
			o.CheckoutLockPath, o.CheckoutLock, o.CheckoutLockReason = lk.path, word, lk.why
		}
		if word == lockHeld {
			break
		}
	}
	switch {
	case o.CheckoutLock == lockHeld:
		o.State = UpdateActive
	case o.CheckoutLock == lockUnknown && o.CheckoutLockReason != problem && o.State != UpdateActive:
		o.State = UpdateUnknown
	}
}

// flipPrefix starts the ID of the receipt a flip of the layout's link
// stands for.
const flipPrefix = "link:"

// worktreesDir is the directory of an updater's worktrees that a link may
// lead into, named by their revisions: <root>/.worktrees/<hash>.
const worktreesDir = ".worktrees"

// stampLink stamps the layout's link as it is at a binding: a flip proves
// a reload only where the link is no longer the one stamped.
func (c *config) stampLink() *updater.ReceiptFiles {
	rf := updater.ReceiptFiles{Stamps: make(map[string]fsread.Stamp)}
	st, err := fsread.LstatStamp(c.link)
	switch {
	case err != nil:
		rf.Problem = err.Error()
	case st.Present():
		rf.Stamps[c.link] = st
	}
	return &rf
}

// observeFlip sets in o the receipt that a flip of the layout's link stands
// for: outcome success, for the revision that the link's worktree is named
// after. A link unchanged since the stamps in since (nil: no stamps) stands
// for no receipt, and a link that does not lead to a worktree named by a
// revision is a receipt problem.
func (c *config) observeFlip(o *Observation, since *updater.ReceiptFiles) {
	o.ReceiptPath = c.link
	problem := func(why string) { o.ReceiptProblem = "the link " + c.link + " " + why }
	if since != nil && since.Problem != "" {
		problem("could not be read when the guard bound: " + since.Problem)
		return
	}
	st, err := fsread.LstatStamp(c.link)
	if err != nil {
		problem("cannot be read: " + err.Error())
		return
	}
	if since != nil {
		if old, ok := since.Stamps[c.link]; ok && old == st {
			return // the flip seen at the binding proves nothing
		}
	}
	if !st.Present() {
		problem("is missing")
		return
	}
	if !st.IsLink() {
		problem("is not a symbolic link")
		return
	}
	target, err := os.Readlink(c.link)
	if err != nil {
		problem("cannot be read: " + err.Error())
		return
	}
	if again, err := fsread.LstatStamp(c.link); err != nil || again != st {
		problem("changed while it was read")
		return
	}
	hash := filepath.Base(target)
	if filepath.Base(filepath.Dir(target)) != worktreesDir || !gitread.IsRevision(hash) {
		problem("leads to " + target + ", not to a worktree " + worktreesDir + "/<revision>")
		return
	}
	dir := target
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(c.link), dir)
	}
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		problem("leads to a worktree that cannot be resolved: " + err.Error())
		return
	}
	o.worktree = dir
	o.Receipt = &Receipt{
		ID:         flipPrefix + c.link + " -> " + target + " @ " + st.ChangedAt().UTC().Format(time.RFC3339Nano),
		Outcome:    updater.OutcomeSuccess,
		To:         strings.ToLower(hash),
		FinishedAt: st.ChangedAt(),
	}
}

// maxProfileHomes bounds the profile homes a guard reads, and
// maxProfileEntries the entries of the profiles directory it reads to find
// them: past either, no profile home is read and the marker is unknown,
// since a part of the homes proves nothing of the others.
const (
	maxProfileHomes   = 64
	maxProfileEntries = 4096
)

// updaterHomes are the homes where an updater may keep its files: the
// guard's own and, for a layout with profiles, the root the profiles share
// and every profile home under it. The profile homes are listed again when
// the profiles directory changes.
type updaterHomes struct {
	home     string // the guard's own home, absolute
	root     string // the root of the profiles; home where there are none
	profiles string // Layout.Profiles; "" for none
	checkout string // Layout.Checkout; "" for none
	now      func() time.Time

	mu      sync.Mutex // protects stamp, list and problem
	stamp   fsread.Stamp
	list    []string // the homes under root/profiles, as last listed
	problem string   // why that listing is not whole, or ""
}

// newUpdaterHomes returns the homes of a guard whose home is home
// (absolute). A home is a profile home if, its links resolved, it is in the
// profiles directory (a ~/.hermes-work that leads to <root>/profiles/work):
// its root is then two directories up. The links are resolved on x within
// timeout; a home on a file system that does not answer is taken as spelt.
func newUpdaterHomes(home, profiles, checkout string, now func() time.Time, x *bounded.Executor, timeout time.Duration) *updaterHomes {
	h := &updaterHomes{home: home, root: home, profiles: profiles, checkout: checkout, now: now}
	if profiles == "" {
		return h
	}
	real := filepath.Clean(home)
	if t, stuck := bounded.Submit(context.Background(), x, nil, timeout, func(t *bounded.Task[string]) {
		t.Val, _ = filepath.EvalSymlinks(home)
	}, nil); stuck == nil && t.Err == nil && t.Val != "" {
		real = t.Val
	}
	if filepath.Base(filepath.Dir(real)) == profiles {
		h.root = filepath.Dir(filepath.Dir(real))
	}
	return h
}

// installedFor is the checkout the updater's installer puts in the home
// that holds the receipt at path (a receipt that names no checkout proves a
// reload only of it) and its identity (updater.CheckoutID), or why that
// cannot be told. It is <home>/<Layout.Checkout>, as the installer puts
// it in the home it runs for; where that home has none, the one of the
// root of the homes, which its profiles share. rel is the receipt's path
// relative to its home.
func (h *updaterHomes) installedFor(path, rel string) (dir, id, why string) {
	switch {
	case h == nil:
		return "", "", "no home directory is known"
	case h.checkout == "":
		return "", "", "the layout names no checkout that its installer puts in the homes"
	}
	home, ok := strings.CutSuffix(filepath.Dir(path), string(filepath.Separator)+filepath.Dir(rel))
	if filepath.Dir(rel) == "." {
		home, ok = filepath.Dir(path), true
	}
	if !ok {
		return "", "", "the home that holds it cannot be told from its path"
	}
	dir = filepath.Join(home, filepath.FromSlash(h.checkout))
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) && filepath.Clean(home) != filepath.Clean(h.root) {
		dir = filepath.Join(h.root, filepath.FromSlash(h.checkout)) // the profiles' shared install
	}
	id, err := updater.CheckoutID(dir)
	if err != nil {
		return dir, "", err.Error()
	}
	return dir, id, ""
}

// all returns the homes, the guard's own first, and why the list is not
// whole ("" when it is): a profile home that is not read may hold a
// marker or a newer receipt, so a list that is not whole proves nothing.
func (h *updaterHomes) all() (homes []string, problem string) {
	homes = []string{h.home}
	if h.profiles == "" {
		return homes, ""
	}
	if h.root != h.home {
		homes = append(homes, h.root)
	}
	profiles, _, problem := h.profileHomes()
	for _, p := range profiles {
		if !slices.Contains(homes, p) {
			homes = append(homes, p)
		}
	}
	return homes, problem
}

// profileHomes lists the directories of root/profiles whose names do not
// start with a dot, and says why the list is not whole (the directory could
// not be read, or holds more than maxProfileHomes homes). It reuses the
// last listing while the directory's stamp is unchanged and settled. links
// are the directory's links that lead to no directory; a listing that found
// one is not kept, since what a link leads to can become a home while the
// directory's stamp stays the same.
func (h *updaterHomes) profileHomes() (list, links []string, problem string) {
	dir := filepath.Join(h.root, h.profiles)
	st, err := fsread.StatStamp(dir)
	if err != nil {
		return nil, nil, "the profile homes " + dir + " cannot be listed: " + err.Error()
	}
	if !st.Present() || !st.IsDir() {
		return nil, nil, ""
	}
	h.mu.Lock()
	if h.list != nil && h.stamp == st {
		defer h.mu.Unlock()
		return h.list, nil, h.problem
	}
	h.mu.Unlock()
	list, links, problem = listProfileHomes(dir)
	if len(links) == 0 && st.Settled(h.now()) {
		h.mu.Lock()
		h.stamp, h.list, h.problem = st, list, problem
		h.mu.Unlock()
	}
	return list, links, problem
}

// listProfileHomes lists the profile homes of dir, at most maxProfileHomes
// of them, reading at most maxProfileEntries entries, and the symbolic
// links in it that lead to no directory (dangling, or to something else):
// whether one is a home can change with no change of dir.
func listProfileHomes(dir string) (list, links []string, problem string) {
	names, err := fsread.ReadNames(dir, maxProfileEntries, func(n string) bool { return !strings.HasPrefix(n, ".") })
	if err != nil {
		return []string{}, nil, "the profile homes cannot be listed: " + err.Error()
	}
	slices.Sort(names)
	list = []string{}
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir():
			// Removed, a dangling link, or no directory.
			if li, err := os.Lstat(p); err == nil && li.Mode()&fs.ModeSymlink != 0 {
				links = append(links, p)
			}
			continue
		case err != nil:
			return []string{}, nil, "the profile home " + p + " cannot be read: " + err.Error()
		}
		if len(list) == maxProfileHomes {
			return []string{}, nil, fmt.Sprintf("%s holds more than %d profile homes: they are not read", dir, maxProfileHomes)
		}
		list = append(list, p)
	}
	return list, links, ""
}

// markerPaths returns the marker's paths in every home, the guard's own
// first, and why the homes are not all known.
func (c *config) markerPaths() (paths []string, problem string) {
	if c.homes == nil {
		return nil, ""
	}
	homes, problem := c.homes.all()
	for _, home := range homes {
		paths = append(paths, filepath.Join(home, c.markerRel))
	}
	return paths, problem
}

// receiptSources are where every home keeps its receipts, and why they
// are not all of them ("" when they are).
func (c *config) receiptSources() ([]updater.ReceiptSource, string) {
	if c.homes == nil || c.receiptRel == "" && c.historyRel == "" {
		return nil, ""
	}
	homes, problem := c.homes.all()
	var srcs []updater.ReceiptSource
	for _, home := range homes {
		var s updater.ReceiptSource
		if c.receiptRel != "" {
			s.Latest = filepath.Join(home, c.receiptRel)
		}
		if c.historyRel != "" {
			s.History = filepath.Join(home, c.historyRel)
		}
		srcs = append(srcs, s)
	}
	return srcs, problem
}
