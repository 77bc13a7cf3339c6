package runtimeguard

import (
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

// MarkerState classifies the updater's in-progress marker. Its values are
// the lower-case words of the JSON contract (the abandoned marker's word
// is "stale", as the updater's tools and earlier payloads spell it; in
// this package's names "stale" is only the guard's answer):
//
//   - [MarkerAbsent]: nothing exists at the marker path, not even a link.
//   - [MarkerActive]: the marker is within the age limit and its process is
//     alive (a process that may not be signalled is alive).
//   - [MarkerAbandoned]: the marker is older than the age limit, whatever its
//     process ID; or its process is gone; or its process ID now belongs to
//     a process that started after the marker was written.
//   - [MarkerUnknown]: something is at the path but proves nothing: a
//     link, a FIFO, socket, device or directory, an unreadable, oversized
//     or malformed file, a time that is not finite or lies in the future, a
//     marker within the age limit whose process ID is zero, negative or too
//     large for the platform, or a process whose liveness cannot be
//     determined; also the state when no home directory is known.
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

// markerState is the state of a marker that proves l of its update.
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

// UpdateState is the diagnostic a [StaleError] carries: what can be
// observed of the updater. These are observations, not receipts: a missing
// marker does not prove that an update succeeded, since the updater removes
// it when it fails too. Its values:
//
//   - [UpdateUnverified]: no marker and no recovery marker. Nothing says an
//     update is running, and nothing proves one finished.
//   - [UpdateActive]: the marker is active, or a process holds the
//     updater's checkout lock: an update is running now.
//   - [UpdateAbandoned] ("stale" in JSON): the marker is abandoned: an
//     updater is gone or ran too long.
//   - [UpdateUnknown]: the marker is unknown, or an install root could not
//     be searched.
//   - [UpdateIncomplete]: a recovery marker says the install is incomplete.
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

// Observation is everything one look at the updater's files found, for
// diagnostics: the answer of [Guard.Observe]. Its JSON keys are those of
// the command-line tool's status.
type Observation struct {
	// MarkerPath is the update marker's path, empty when no home directory
	// is known. Where the layout has profiles, it is the marker of
	// whichever home says the most (an active marker over an unknown one,
	// over a stale one, over none), the guard's own home first.
	MarkerPath string `json:"marker_path"`
	// Marker is the marker's state, and MarkerReason why.
	Marker       MarkerState `json:"update_marker"`
	MarkerReason string      `json:"update_marker_reason,omitempty"`
	// InstallRoots are the directories searched for recovery markers:
	// those of the bound module and, where the module path now leads to
	// another module (a deploy flipped a link), those of that one.
	InstallRoots []string `json:"install_roots"`
	// RecoveryMarkers are the recovery markers found there.
	RecoveryMarkers []string `json:"recovery_markers"`
	// State is the update state they add up to.
	State UpdateState `json:"update_state"`
	// ReceiptPath is the file of the newest receipt (the latest receipt,
	// or one the updater retained of a run); where none was read, the
	// layout's latest receipt in the guard's home; the layout's link where
	// it has one ([Layout].Link). Empty when the layout has none or no
	// home directory is known.
	ReceiptPath string `json:"receipt_path,omitempty"`
	// Receipt is what the newest receipt says; nil when there is none that
	// could be read, and ReceiptProblem then says why, unless there is no
	// receipt at all.
	Receipt        *Receipt `json:"receipt,omitempty"`
	ReceiptProblem string   `json:"receipt_problem,omitempty"`
	// LockPath is the updater's lock file; empty when the layout has none
	// or no home directory is known.
	LockPath string `json:"lock_path,omitempty"`
	// CheckoutLockPath is the updater's kernel lock on the checkout (the
	// held one, where several installs are read), in the common Git
	// directory git's discovery finds; CheckoutLock is "free" (no
	// process holds it, or it has no file), "held" (a process holds it: an
	// update runs) or "unknown" (this platform cannot tell, the repository
	// that holds it cannot be found, or a link or another file than a
	// regular one is at its name), and CheckoutLockReason why. A held lock makes State active: a process
	// of an update's tree still runs, even where the marker is gone.
	// Empty when the layout has no checkout lock.
	CheckoutLockPath   string `json:"checkout_lock_path,omitempty"`
	CheckoutLock       string `json:"checkout_lock,omitempty"`
	CheckoutLockReason string `json:"checkout_lock_reason,omitempty"`
	// Check is how a check of an unchanged checkout proves it unchanged:
	// "watch" (one system call on an inotify descriptor), "stat" (a stat
	// of each file the answer depends on) or "read" (Options.Check:
	// a full read); empty for an unbound guard. CheckReason says why a
	// guard that could watch does not.
	Check       string `json:"check,omitempty"`
	CheckReason string `json:"check_reason,omitempty"`
	// IdentifiedBy is how the guard identifies the install it is bound
	// to (see [Identity]): "git" (HEAD's revision), "build stamp" (no Git
	// checkout identifies it: the module file and the build its stamp
	// names) or "file" (the module file alone); empty for an unbound
	// guard.
	IdentifiedBy string `json:"identified_by,omitempty"`
	// worktree is the directory the layout's link leads to, links
	// resolved, where a flip of it is the Receipt.
	worktree string
	// writersGone says, for a running Receipt, that every process it
	// names as its writer is gone, and how that was told; "" otherwise.
	writersGone string
	// checkout is the top-level directory of the checkout the receipts
	// were read for (receipts naming another were passed over), and
	// homesRoot the root of the homes they were read from, links
	// resolved, or why it cannot be told (homesRootWhy).
	checkout, homesRoot, homesRootWhy string
	// Unguarded says why Git does not guard the install a guard is bound
	// to: the module is not tracked in a Git checkout whose HEAD names a
	// commit (no repository, or HEAD that names none git can read, the
	// module outside the worktree or not in its index, an unborn
	// branch), so the guard identifies it without Git (IdentifiedBy),
	// and a write in place of the module goes unseen. Empty for a guard
	// bound to a Git checkout, and for an unbound one. See
	// [Options.RequireCheckout].
	Unguarded string `json:"unguarded,omitempty"`
}

// Receipt is what the updater wrote after a run (or, with outcome
// "running", while it runs): schema 1 of the updater's receipt. Its JSON
// keys are those of the command-line tool's status.
type Receipt struct {
	// ID names what the receipt proves, never a file's identity (an inode
	// is reused): "update_id:" and the update_id where the updater wrote
	// one; else "correlation_id:" and the correlation_id, with the
	// revision after the update and the time it finished (a launcher may
	// reuse its correlation_id for another update); else "sha256:" and a
	// digest of the receipt's bytes; for the flip of a [Layout].Link,
	// "link:" and the link's path, what it leads to (the worktree named by
	// its revision) and when it was made (the link's change time). A plan
	// scheduled on a receipt spends it, for the binding the plan was made
	// on.
	ID string `json:"id"`
	// UpdateID and CorrelationID name the run, where the updater wrote
	// them (Hermes's updater writes one, the other or neither, by its
	// version).
	UpdateID      string `json:"update_id,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Outcome is how the run ended: "running", "success", "partial",
	// "failed" or "refused"; another word the updater may write later
	// proves nothing.
	Outcome string `json:"outcome"`
	// From and To are the code revisions before and after the run
	// (pre_update.sha and post_update.sha), empty where none was recorded.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// StartedAt and FinishedAt are when the run began and ended;
	// FinishedAt is the zero time while it runs.
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Checkout is the top-level directory of the checkout the update was
	// run on, where the receipt names one (runtimeguard update writes it;
	// Hermes's updater does not). A receipt that names another checkout
	// than the guard's is never read for it; one that names none proves a
	// reload only of a checkout inside the homes' root (see
	// [Guard.PlanReload]).
	Checkout string `json:"checkout,omitempty"`
}

// Observe is [Guard.Observe] without a guard: it reads the updater's files
// for the install opts describe, its source directory being the directory
// of opts.ModulePath (links resolved as far as they lead), without reading
// the checkout, and waits for them at most opts.ReadTimeout, as
// [Guard.Observe] does. It serves a host that could not bind (New failed:
// the checkout could not be read, is moving, or the module is missing) and
// still wants to say what the updater is doing; its error is an
// [*OptionError], for options that describe no install, or a module path
// that cannot be made absolute.
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
	t, stuck := bounded.Submit(context.Background(), cfg.ux, nil, cfg.timeout, func(t *bounded.Task[Observation]) {
		deadline := time.Now().Add(cfg.timeout)
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

// receiptRead says which receipt a look at the updater's files reads: none
// (the stale path needs only the update state), the newest of all, or the
// newest written since a listing.
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
		o.checkout = f.checkout
		o.homesRoot, o.homesRootWhy = c.homes.realRoot()
		f, problem := c.env.upd.NewestReceipt(rf, rr.since, o.checkout)
		if f != nil {
			o.ReceiptPath = f.Path
			o.Receipt = receiptOf(&f.Receipt)
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

// receiptOf is the receipt r, in this package's words.
func receiptOf(r *updater.Receipt) *Receipt {
	return &Receipt{
		ID: r.ID, UpdateID: r.UpdateID, CorrelationID: r.CorrelationID, Outcome: r.Outcome,
		From: r.From, To: r.To, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Checkout: r.Checkout,
	}
}

// combine is the update state of a marker and the recovery markers: an
// unknown marker or an install root that could not be searched is
// unknown, a recovery marker incomplete, and otherwise the marker's own
// state, absent reading as unverified.
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

// staleFacts is what a look at the updater's files for a stale answer
// found, before the rules that move with the clock and with processes
// are applied: the facts of every home's marker, why the homes are not
// all known, the install roots and what each of them holds.
type staleFacts struct {
	markers   []updater.MarkerFacts // the guard's own home first; one of path "" when no home is known
	problem   string                // why not every home was read, or ""
	links     []string              // the profiles directory's links that lead to no directory
	roots     []string
	locks     []probedLock // the checkout locks of the roots, probed
	lockWhy   string       // why a root's checkout lock cannot be found, or ""
	present   []string
	rootsRead bool
	// checkout is the top-level directory of the checkout that holds the
	// last of the source directories (the directory the module path
	// leads to now), as git's discovery finds it, where it was asked
	// for; "" where none holds it or it cannot be read.
	checkout string
}

// readStaleFacts reads the updater's files for the installs whose source
// directories are srcs: each home's marker and the artifacts beside it,
// and what each install root holds (see rootFacts), on the root's
// executor, until deadline at the latest: a root not read makes the
// update state unknown. top asks for the checkout of the last of srcs.
func (c *config) readStaleFacts(srcs []string, top bool, deadline time.Time) staleFacts {
	f := staleFacts{roots: c.installRoots(srcs...), rootsRead: true}
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
			f.rootsRead = false
			if c.checkoutLock != "" {
				f.lockWhy = why
			}
			continue
		}
		f.present = append(f.present, r.present...)
		f.rootsRead = f.rootsRead && r.read
		if r.lockWhy != "" {
			f.lockWhy = r.lockWhy
		}
		for _, lk := range r.locks {
			if !slices.ContainsFunc(f.locks, func(o probedLock) bool { return o.path == lk.path }) {
				f.locks = append(f.locks, lk)
			}
		}
		if root == last {
			f.checkout = r.top
		}
	}
	paths, links, problem := c.markerPathsAndLinks()
	f.problem, f.links = problem, links
	if len(paths) == 0 {
		paths = []string{""}
	}
	for _, p := range paths {
		f.markers = append(f.markers, c.env.upd.ReadMarker(p))
	}
	return f
}

// rootFacts is what one install root holds: its recovery markers, and
// whether they could all be looked for; its checkout locks, probed, or why
// they cannot be found; and, where asked, the top-level directory of the
// checkout that holds it.
type rootFacts struct {
	present []string
	read    bool
	locks   []probedLock
	lockWhy string
	top     string
}

// readRoot reads what the install root root holds, top included where
// asked for.
func (c *config) readRoot(root string, top bool) rootFacts {
	var r rootFacts
	locks, why := c.checkoutLocks([]string{root})
	r.lockWhy = why
	for _, lk := range locks {
		state, why := updater.ProbeCheckoutLock(lk.path, lk.follow)
		r.locks = append(r.locks, probedLock{lk, state, why})
	}
	r.present, r.read = updater.RecoveryMarkers([]string{root}, c.recovery)
	if top {
		if l, err := gitread.Locate(root); err == nil {
			r.top = l.TopLevel
		}
	}
	return r
}

// judgeMarkers classifies the markers of f now and returns the one that
// counts, with its path: the guard's own, unless another home's says
// more. It is the one classification of the updater's markers, of a
// read of the updater's files.
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

// staleObservation is the observation of a stale answer (no receipt read)
// that the facts f add up to now.
func (c *config) staleObservation(f *staleFacts) Observation {
	m, mpath := c.judgeMarkers(f)
	o := Observation{
		MarkerPath:      mpath,
		Marker:          markerState(m.Life),
		MarkerReason:    m.Reason,
		InstallRoots:    nonNil(f.roots),
		RecoveryMarkers: nonNil(f.present),
		State:           combine(markerState(m.Life), len(f.present) > 0, f.rootsRead),
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

// checkoutLock is a checkout lock to probe: its path, and whether it is
// probed through a link at its name, as the updater's own path is (see
// updater.CheckoutLockPaths).
type checkoutLock struct {
	path   string
	follow bool
}

// checkoutLocks are the checkout locks of the install roots, once each
// (see updater.FindCheckoutLock: where a writer takes each, and where the
// updater's own reader would), and why one cannot be found ("" when all
// are); none for a layout without one.
func (c *config) checkoutLocks(roots []string) (locks []checkoutLock, problem string) {
	if c.checkoutLock == "" {
		return nil, ""
	}
	for _, root := range roots {
		l, err := updater.FindCheckoutLock(root, c.checkoutLock)
		if err != nil {
			problem = "the checkout lock of " + root + " cannot be found: " + err.Error()
			continue
		}
		for _, lk := range []checkoutLock{{l.Path, false}, {l.Also, true}} {
			if lk.path != "" && !slices.ContainsFunc(locks, func(o checkoutLock) bool { return o.path == lk.path }) {
				locks = append(locks, lk)
			}
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

// probedCheckoutLocks sets in o what the probes of the checkout locks
// found: the first held (else unknown, else the first) lock, its state
// and why; a held lock makes the update active, one that cannot be probed
// unknown where nothing else says it is active. One that cannot be found
// (problem: git cannot read the repository, so neither can an updater
// that runs git) is unknown too, and plans nothing, but leaves the update
// state to the markers. A lock is probed on each look, as a process's
// liveness is: whether a process holds it changes with no change of any
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

// observeFlip reads the layout's link into o as the receipt of the update
// that flipped it since the stamps in since (nil: whatever it is now): a
// receipt of outcome success for the revision of the worktree the link is
// named after, identified by the link's file and target, with no receipt
// where the link is the one stamped. A link that does not lead to a
// worktree named by a revision is a receipt problem.
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

// maxProfileHomes bounds the profile homes a guard reads the updater's
// files in, and maxProfileEntries the entries of the profiles directory it
// reads to find them: past either, the homes are not read, and the
// updater's files are unknown (they prove nothing), never a part of them
// taken for all.
const (
	maxProfileHomes   = 64
	maxProfileEntries = 4096
)

// updaterHomes is where an updater may keep its files: the guard's home
// and, for a layout with profiles, the root those profiles share and every
// profile home under it. The profile homes are listed again when the
// profiles directory changes.
type updaterHomes struct {
	home     string // the guard's own home, absolute
	root     string // the root of the profiles; home where there are none
	profiles string // Layout.Profiles; "" for none
	now      func() time.Time

	mu      sync.Mutex // protects stamp, list and problem
	stamp   fsread.Stamp
	list    []string // the homes under root/profiles, as last listed
	problem string   // why that listing is not whole, or ""
}

// newUpdaterHomes is the homes of a guard whose home is home (absolute).
// A home is a profile home by what it is, not how it is spelt: its links
// resolved (a ~/.hermes-work that leads to <root>/profiles/work), a home
// under the profiles directory has the root above it. The links are
// resolved on x, waited for at most timeout: a home on a file system
// that does not answer is taken as spelt.
func newUpdaterHomes(home, profiles string, now func() time.Time, x *bounded.Executor, timeout time.Duration) *updaterHomes {
	h := &updaterHomes{home: home, root: home, profiles: profiles, now: now}
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

// realRoot is the root of the homes, its links resolved (a receipt that
// names no checkout proves a reload only of a checkout inside it), or why
// it cannot be told.
func (h *updaterHomes) realRoot() (root, why string) {
	if h == nil {
		return "", "no home directory is known"
	}
	root, err := filepath.EvalSymlinks(h.root)
	if err != nil {
		return "", "the homes' root " + h.root + " cannot be resolved: " + err.Error()
	}
	return root, ""
}

// all returns the homes, the guard's own first, and why the list is not
// whole ("" when it is): a profile home that is not read may hold a
// marker or a newer receipt, so a list that is not whole proves nothing.
func (h *updaterHomes) all() ([]string, string) {
	homes, _, problem := h.allAndLinks()
	return homes, problem
}

// allAndLinks is all, and also returns the links of the profiles
// directory that lead to no directory (see listProfileHomes).
func (h *updaterHomes) allAndLinks() (homes, links []string, problem string) {
	homes = []string{h.home}
	if h.profiles == "" {
		return homes, nil, ""
	}
	if h.root != h.home {
		homes = append(homes, h.root)
	}
	profiles, links, problem := h.profileHomes()
	for _, p := range profiles {
		if !slices.Contains(homes, p) {
			homes = append(homes, p)
		}
	}
	return homes, links, problem
}

// profileHomes lists the directories of root/profiles whose names do not
// start with a dot, through the last listing while the directory's stamp
// is the same and settled, and says why the list is not whole: the
// directory could not be read, or holds more than maxProfileHomes homes.
// links are the directory's links that lead to no directory: a listing
// that found one is not kept, as what it leads to can become a home
// while the directory's stamp stays the same.
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

// markerPathsAndLinks returns the marker's paths in every home, the
// guard's own first, the links of the profiles directory that lead to no
// directory (see listProfileHomes), and why the homes are not all known.
func (c *config) markerPathsAndLinks() (paths, links []string, problem string) {
	if c.homes == nil {
		return nil, nil, ""
	}
	homes, links, problem := c.homes.allAndLinks()
	for _, home := range homes {
		paths = append(paths, filepath.Join(home, c.markerRel))
	}
	return paths, links, problem
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
