package runtimeguard

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
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
	// InstallRoots are the directories searched for recovery markers.
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
	// held one, where several installs are read); CheckoutLock is
	// "free" (no process holds it, or it has no file), "held" (a process
	// holds it: an update runs) or "unknown" (this platform cannot tell), and
	// CheckoutLockReason why. A held lock makes State active: a process
	// of an update's tree still runs, even where the marker is gone.
	// Empty when the layout has no checkout lock.
	CheckoutLockPath   string `json:"checkout_lock_path,omitempty"`
	CheckoutLock       string `json:"checkout_lock,omitempty"`
	CheckoutLockReason string `json:"checkout_lock_reason,omitempty"`
	// Check is how a check of an unchanged checkout proves it unchanged:
	// "watch" (one system call on an inotify descriptor), "stat" (a stat
	// of each file the answer depends on) or "read" (Options.Check:
	// a full read); empty for an unbound or inert guard. CheckReason says
	// why a guard that could watch does not.
	Check       string `json:"check,omitempty"`
	CheckReason string `json:"check_reason,omitempty"`
	// worktree is the directory the layout's link leads to, links
	// resolved, where a flip of it is the Receipt.
	worktree string
	// Unguarded says why a guard bound to a module guards nothing: the
	// module is not tracked in a Git checkout whose HEAD names a commit
	// (no repository, or HEAD that names none git can read, the module
	// outside the worktree or not in its index, an unborn branch), so
	// every check passes. Empty for a guard bound to a revision, and for
	// an unbound one. See [Options.RequireCheckout].
	Unguarded string `json:"unguarded,omitempty"`
}

// Receipt is what the updater wrote after a run (or, with outcome
// "running", while it runs): schema 1 of the updater's receipt. Its JSON
// keys are those of the command-line tool's status.
type Receipt struct {
	// ID identifies the receipt: "update_id:" and the update_id where the
	// updater wrote one, else "correlation_id:" and the correlation_id,
	// else "sha256:" and a digest of the receipt's bytes with its file's
	// identity; for the flip of a [Layout].Link, "link:" and the link's
	// path, file identity and target. A plan scheduled on a receipt
	// spends it.
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

// markerRank orders marker states by how much they say an update may be
// under way: of the markers of several homes, the highest counts.
var markerRank = map[MarkerState]int{MarkerAbsent: 0, MarkerAbandoned: 1, MarkerUnknown: 2, MarkerActive: 3}

// observeAt reads the updater's files for the installs whose source
// directories are srcs, and the receipt rr asks for.
func (c *config) observeAt(rr receiptRead, srcs ...string) Observation {
	f := c.readStaleFacts(srcs)
	o := c.staleObservation(&f)
	if !rr.read {
		return o
	}
	if c.link != "" {
		c.observeFlip(&o, rr.since)
		return o
	}
	if srcs, missing := c.receiptSources(); len(srcs) > 0 {
		rf := updater.ListReceipts(srcs)
		if missing != "" && rf.Problem == "" {
			rf.Problem = missing // a home not read may hold a newer receipt
		}
		f, problem := c.env.upd.NewestReceipt(rf, rr.since)
		if f != nil {
			o.ReceiptPath = f.Path
			r := Receipt(f.Receipt)
			o.Receipt = &r
		}
		o.ReceiptProblem = problem
	}
	return o
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

// pidReuseSlack is how long after the marker's time its writer may appear to
// have started. A writer starts before it reads the clock for the marker, and
// start times never come out late: Linux counts them in 10 ms clock ticks
// against a boot time known to the nanosecond, macOS in microseconds, both
// rounded down, and Windows in 100 ns. The slack covers the rest, which is
// jitter: a marker time written in whole seconds (up to a second early), the
// realtime clock stepped since the writer started, and the rounding of the
// time as it is written and parsed. A live process that started later
// than this did not write the marker: its process ID was reused.
const pidReuseSlack = time.Second

// marker is the classification of a marker, with the reason for it.
type marker struct {
	State MarkerState
	// Reason says why the state is what it is, in a few words: "no file",
	// "process 123 is alive", "a symbolic link", "over the age limit".
	Reason string
}

// liveness is what a process probe learned.
type liveness int

// The answers of a process probe.
const (
	livenessUnknown liveness = iota
	processAlive
	processGone
)

// procInfo is the answer of a process probe. Start is the zero time when
// the platform cannot tell when the process started.
type procInfo struct {
	State liveness
	Start time.Time
}

// probeProcess reports whether pid is alive and, where the platform can
// tell, when it started. A process ID out of the platform's range is
// unknown, never truncated into another.
func probeProcess(pid int64) procInfo {
	if pid <= 0 || pid > maxPID {
		return procInfo{}
	}
	return probeLiveness(pid)
}

// markerEnv is what markers are classified through, replaceable per
// instance so that tests can run in parallel.
type markerEnv struct {
	now func() time.Time
	// probe reports whether pid is alive and when it started.
	probe func(pid int64) procInfo
	// open reads a small file without following links or blocking (see
	// updater.SafeOpen).
	open func(path string, limit int64) (body []byte, kind updater.FileKind, why string)
	// cache, when not nil, spares a classification of an unchanged marker
	// its reads.
	cache *markerCache
}

// systemMarkers is the real environment.
var systemMarkers = &markerEnv{now: time.Now, probe: probeProcess, open: updater.SafeOpen}

// withCache is e with a cache of its own.
func (e *markerEnv) withCache() *markerEnv {
	c := *e
	c.cache = new(markerCache)
	return &c
}

// close releases what e's cache holds (see markerCache.close).
func (e *markerEnv) close() {
	if e.cache != nil {
		e.cache.close()
	}
}

// read classifies the marker at path with the age limit maxAge. It never
// blocks, never follows a symbolic link, never reads more than
// updater.MaxMarkerBytes+1 bytes and never changes the file. An empty path
// (no home directory known) is unknown.
//
// An updater that releases its marker by renaming it aside first (to
// <marker>.cas-release-<pid>-<id>, then reading and removing it) has not
// finished while that process lives: such a release in flight makes the
// marker active; one whose process is gone counts for nothing. Any other
// <marker>.cas-* artifact is an updater's cleanup left unresolved, and
// unknown.
func (e *markerEnv) read(path string, maxAge time.Duration) marker {
	m, _ := e.readBody(path, maxAge)
	return m
}

// readBody is read, with the bytes of the marker file it judged: nil when
// none were read (no file, one that proves nothing, or a parse the cache
// kept). Beside an active marker it reads nothing more.
func (e *markerEnv) readBody(path string, maxAge time.Duration) (marker, []byte) {
	if path == "" {
		return marker{MarkerUnknown, "no home directory is known"}, nil
	}
	f := markerFacts{Path: path}
	e.readFileFacts(&f)
	if m := e.judgeFile(&f, maxAge); m.State == MarkerActive {
		return m, f.body
	}
	e.readArtifactFacts(&f)
	return e.judge(&f, maxAge), f.body
}

// markerFacts is what a read of a marker and of the artifacts beside it
// found: all that its classification takes from files. The rules that
// move without any file changing (the age limit with the clock, a
// process's liveness) are applied by judge on each use, so that a caller
// may keep the facts while it knows none of those files changed.
type markerFacts struct {
	// Path is the marker's path, "" when no home directory is known.
	Path string
	// file is the state of a marker file that was not parsed (absent, or
	// unknown and why); parsed, pid and started are the parse of one
	// that was, body the bytes read (nil when the cache kept the parse).
	file    marker
	parsed  bool
	pid     int64
	started float64
	ids     updater.Identities // the lines after the first two
	body    []byte
	// empty is an empty marker file, modified at emptyAt: a claim being
	// published, or one never finished.
	empty   bool
	emptyAt time.Time
	// dirWhy is why the marker's directory could not be searched for
	// artifacts, or ""; artifacts are those found there.
	dirWhy    string
	artifacts []artifactFact
}

// artifactFact is one artifact beside the marker: its path, its name less
// the marker's, and its change time (the rename that made it) when lstat
// found it.
type artifactFact struct {
	path, suffix string
	changed      time.Time
	stamped      bool
}

// readFacts reads the marker at path and the artifacts beside it, as read
// does (never blocking, following no link, reading at most
// updater.MaxMarkerBytes+1 bytes), and applies no rule of time or
// liveness. An empty path (no home directory known) reads nothing.
func (e *markerEnv) readFacts(path string) markerFacts {
	f := markerFacts{Path: path}
	if path == "" {
		return f
	}
	e.readFileFacts(&f)
	e.readArtifactFacts(&f)
	return f
}

// readFileFacts reads the marker file of f.
func (e *markerEnv) readFileFacts(f *markerFacts) {
	var st fsread.Stamp
	if e.cache != nil {
		var err error
		if st, err = fsread.LstatStamp(f.Path); err == nil && st.Present() {
			if pid, started, ids, ok := e.cache.parsed(f.Path, st); ok {
				f.pid, f.started, f.ids, f.parsed = pid, started, ids, true
				return
			}
		}
	}
	body, kind, why := e.open(f.Path, updater.MaxMarkerBytes)
	switch kind {
	case updater.FileAbsent:
		f.file = marker{MarkerAbsent, "no file"}
		return
	case updater.FileUnusable:
		f.file = marker{MarkerUnknown, why}
		return
	}
	if body == nil {
		body = []byte{}
	}
	f.body = body
	if len(body) == 0 {
		if fi, err := os.Lstat(f.Path); err == nil {
			f.empty, f.emptyAt = true, fi.ModTime()
		}
	}
	pid, started, ok := updater.ParseMarker(body)
	if !ok {
		f.file = marker{MarkerUnknown, "not a process ID and a time on two lines of UTF-8"}
		return
	}
	if e.cache != nil && st.Present() && st.Settled(e.now()) {
		// The stamp is from before the read, and old enough that a
		// rewrite after it changes it (Git's racy rule).
		e.cache.remember(f.Path, st, pid, started, updater.ParseIdentities(body))
	}
	f.pid, f.started, f.ids, f.parsed = pid, started, updater.ParseIdentities(body), true
}

// readArtifactFacts lists the artifacts beside the marker of f and stamps
// each.
func (e *markerEnv) readArtifactFacts(f *markerFacts) {
	dir, base := filepath.Split(f.Path)
	names, why := e.artifactNames(filepath.Clean(dir), base)
	if why != "" {
		f.dirWhy = "the marker's directory cannot be searched: " + why
		return
	}
	for _, name := range names {
		a := artifactFact{path: filepath.Join(dir, name), suffix: strings.TrimPrefix(name, base)}
		if st, err := fsread.LstatStamp(a.path); err == nil && st.Present() {
			a.changed, a.stamped = st.ChangedAt(), true
		}
		f.artifacts = append(f.artifacts, a)
	}
}

// judgeFile classifies the marker file of f alone, now.
func (e *markerEnv) judgeFile(f *markerFacts, maxAge time.Duration) marker {
	if f.Path == "" {
		return marker{MarkerUnknown, "no home directory is known"}
	}
	if f.empty {
		return e.judgeEmpty(f.emptyAt)
	}
	if !f.parsed {
		return f.file
	}
	if m, ok := e.classifyIdentities(f.pid, f.started, &f.ids, maxAge); ok {
		return m
	}
	return e.classify(f.pid, f.started, maxAge)
}

// judgeEmpty judges an empty marker modified at mtime: younger than
// updater.EmptyMarkerGrace it is a claim being published (a writer
// without hard links creates the file, then writes it), and active; older,
// a claim never finished, which the updater takes over: stale.
func (e *markerEnv) judgeEmpty(mtime time.Time) marker {
	age := e.now().Sub(mtime)
	if age < updater.EmptyMarkerGrace {
		return marker{MarkerActive, fmt.Sprintf("empty, written %v ago: a claim being published", age.Round(time.Millisecond))}
	}
	return marker{MarkerAbandoned, fmt.Sprintf("empty, and older than %v: a claim never finished", updater.EmptyMarkerGrace)}
}

// incarnation is whether process pid, created at the recorded creation
// time, runs: alive when a process of that ID runs and its creation time
// lies within updater.CreateTimeTolerance of the one recorded; dead when
// none runs or it is another (a reused ID); unprovable (ok false) when
// its liveness or creation time cannot be told here.
func (e *markerEnv) incarnation(pid int64, created float64, owner bool) (alive bool, why string, ok bool) {
	if pid <= 0 || pid > maxPID {
		return false, "", false
	}
	info := e.probe(pid)
	if owner {
		info = e.probeCached(pid)
	}
	switch info.State {
	case processGone:
		return false, fmt.Sprintf("process %d is gone", pid), true
	case processAlive:
		if info.Start.IsZero() {
			return false, "", false
		}
		start := float64(updater.RecordedStart(info.Start).UnixNano()) / 1e9
		if math.Abs(start-created) > updater.CreateTimeTolerance.Seconds() {
			return false, fmt.Sprintf("process %d was created at %.3f, not at %.3f: its ID was reused", pid, start, created), true
		}
		return true, fmt.Sprintf("process %d, created at %.3f, is alive", pid, created), true
	}
	return false, "", false
}

// classifyIdentities judges a marker of the second format (a creation
// time on line 3), as the updater does: it is active while its owner or
// its delegate runs (the process of that ID with that creation time),
// however old the marker, and stale once both are provably dead. Where
// either cannot be proven (no delegate, or a process whose creation time
// this platform cannot read), ok is false unless the other runs: the
// first format's rules, with the age limit, then judge the owner.
func (e *markerEnv) classifyIdentities(pid int64, started float64, ids *updater.Identities, maxAge time.Duration) (marker, bool) {
	if !ids.HasCreated {
		return e.classifyFirstFormatDelegate(pid, started, ids, maxAge)
	}
	owner, ownerWhy, ownerKnown := e.incarnation(pid, ids.Created, true)
	if owner {
		return marker{MarkerActive, "its owner " + ownerWhy}, true
	}
	d := ids.Delegate
	if d.PID != 0 {
		delegate, delegateWhy, known := e.incarnation(d.PID, d.Created, false)
		if delegate {
			if !ownerKnown {
				ownerWhy = fmt.Sprintf("whether its owner %d runs cannot be told", pid)
			}
			return marker{MarkerActive, fmt.Sprintf("its delegate %s (%s)", delegateWhy, ownerWhy)}, true
		}
		if !known {
			if !ownerKnown {
				return marker{}, false
			}
			m := e.classify(d.PID, started, maxAge)
			m.Reason = "its owner " + ownerWhy + "; its delegate: " + m.Reason
			return m, true
		}
		if ownerKnown {
			return marker{MarkerAbandoned, fmt.Sprintf("its owner %s, and its delegate %s", ownerWhy, delegateWhy)}, true
		}
		return marker{}, false
	}
	if !ownerKnown {
		return marker{}, false
	}
	return marker{MarkerAbandoned, "its owner " + ownerWhy}, true
}

// classifyFirstFormatDelegate judges a marker without the owner's creation
// time that names a delegate, as the updater does: the owner by the first
// format's rules (the age limit), the delegate by its identity, however old
// the marker; it is active while either runs. Without a delegate, ok is
// false: the first format's rules alone judge it.
func (e *markerEnv) classifyFirstFormatDelegate(pid int64, started float64, ids *updater.Identities, maxAge time.Duration) (marker, bool) {
	d := ids.Delegate
	if d.PID == 0 {
		return marker{}, false
	}
	owner := e.classify(pid, started, maxAge)
	if owner.State == MarkerActive {
		return owner, true
	}
	delegate, why, known := e.incarnation(d.PID, d.Created, false)
	switch {
	case delegate:
		return marker{MarkerActive, fmt.Sprintf("its delegate %s (its owner: %s)", why, owner.Reason)}, true
	case known:
		owner.Reason = "its owner: " + owner.Reason + "; its delegate " + why
		return owner, true
	}
	m := e.classify(d.PID, started, maxAge)
	if m.State == MarkerAbandoned {
		m = owner
	}
	m.Reason = fmt.Sprintf("its owner: %s; its delegate %d: %s", owner.Reason, d.PID, m.Reason)
	return m, true
}

// judge classifies the facts f with the age limit maxAge, now: the
// marker's time against the clock, and the liveness of the processes it
// and its artifacts name, asked again (through the cache's process handle
// where there is one). Two calls on the same facts differ only as the
// clock and those processes moved. It is the one classification of a
// marker.
//
// An updater that releases its marker by renaming it aside first (to
// <marker>.cas-release-<pid>-<id>, then reading and removing it) has not
// finished while that process lives: such a release in flight makes the
// marker active; one whose process is gone counts for nothing. Any other
// <marker>.cas-* artifact is an updater's cleanup left unresolved, and
// unknown; so is a directory that cannot be searched for them. An
// artifact that proves nothing makes a marker that proves something
// unknown.
func (e *markerEnv) judge(f *markerFacts, maxAge time.Duration) marker {
	m := e.judgeFile(f, maxAge)
	if m.State == MarkerActive || f.Path == "" {
		return m
	}
	a := e.judgeArtifacts(f)
	if a.State == MarkerActive || a.State == MarkerUnknown && m.State != MarkerUnknown {
		return a
	}
	return m
}

// judgeArtifacts classifies the artifacts of f: a release whose process
// lives is active, an artifact that proves nothing (or a directory that
// cannot be searched) unknown, and otherwise the answer is absent.
func (e *markerEnv) judgeArtifacts(f *markerFacts) marker {
	if f.dirWhy != "" {
		return marker{MarkerUnknown, f.dirWhy}
	}
	result := marker{State: MarkerAbsent}
	for i := range f.artifacts {
		m := e.judgeArtifact(&f.artifacts[i])
		switch {
		case m.State == MarkerActive:
			return m
		case m.State == MarkerUnknown && result.State != MarkerUnknown:
			result = m
		}
	}
	return result
}

// artifacts classifies the artifacts beside the marker at path (see
// judgeArtifacts).
func (e *markerEnv) artifacts(path string) marker {
	f := markerFacts{Path: path}
	e.readArtifactFacts(&f)
	return e.judgeArtifacts(&f)
}

// classify judges a parsed marker in the order of the hermes-webui guard: a
// time that is not finite or lies in the future is unknown; so is a
// process ID of zero or less, whatever the marker's age; then the age
// limit; then a process ID too large for this platform is unknown; then
// liveness.
func (e *markerEnv) classify(pid int64, started float64, maxAge time.Duration) marker {
	nowSec := float64(e.now().UnixNano()) / 1e9
	switch {
	case math.IsNaN(started) || math.IsInf(started, 0):
		return marker{MarkerUnknown, "its time is not finite"}
	case started > nowSec:
		return marker{MarkerUnknown, "its time lies in the future"}
	case pid <= 0:
		return marker{MarkerUnknown, fmt.Sprintf("process ID %d names no process", pid)}
	case nowSec-started > maxAge.Seconds():
		return marker{MarkerAbandoned, fmt.Sprintf("older than %v", maxAge)}
	case pid > maxPID:
		return marker{MarkerUnknown, fmt.Sprintf("process ID %d cannot be asked about here", pid)}
	}
	info := e.probeCached(pid)
	switch info.State {
	case processGone:
		return marker{MarkerAbandoned, fmt.Sprintf("process %d is gone", pid)}
	case processAlive:
		if !info.Start.IsZero() {
			writtenAt := time.Unix(0, int64(started*1e9))
			if info.Start.After(writtenAt.Add(pidReuseSlack)) {
				return marker{MarkerAbandoned, fmt.Sprintf("process %d started after the marker was written: its ID was reused", pid)}
			}
		}
		return marker{MarkerActive, fmt.Sprintf("process %d is alive", pid)}
	}
	return marker{MarkerUnknown, fmt.Sprintf("whether process %d lives cannot be told", pid)}
}

// probeCached is probe, through the cache when there is one.
func (e *markerEnv) probeCached(pid int64) procInfo {
	if e.cache != nil {
		return e.cache.probe(e, pid)
	}
	return e.probe(pid)
}

// judgeArtifact judges one artifact beside a marker, now.
func (e *markerEnv) judgeArtifact(a *artifactFact) marker {
	name := filepath.Base(a.path)
	pid, release := updater.ReleasePID(a.suffix)
	switch {
	case !release:
		return marker{MarkerUnknown, fmt.Sprintf("%s is an updater's unresolved cleanup of the marker", name)}
	case pid <= 0:
		return marker{MarkerUnknown, fmt.Sprintf("%s names no process", name)}
	case pid > maxPID:
		return marker{MarkerUnknown, fmt.Sprintf("%s names process %d, which cannot be asked about here", name, pid)}
	}
	info := e.probe(pid)
	switch info.State {
	case processGone:
		return marker{State: MarkerAbsent}
	case processAlive:
		// A process that started after the rename (its change time) is
		// not the releaser: its ID was reused.
		if a.stamped && !info.Start.IsZero() && info.Start.After(a.changed.Add(pidReuseSlack)) {
			return marker{State: MarkerAbsent}
		}
		return marker{MarkerActive, fmt.Sprintf("process %d is releasing the marker (%s): the update has not finished", pid, name)}
	}
	return marker{MarkerUnknown, fmt.Sprintf("whether process %d, releasing the marker, lives cannot be told", pid)}
}

// artifactNames lists the names of the artifacts beside the marker base in
// dir, through the cache while the directory's stamp is the same and
// settled.
func (e *markerEnv) artifactNames(dir, base string) ([]string, string) {
	st, err := fsread.LstatStamp(dir)
	if err != nil {
		return nil, err.Error()
	}
	if !st.Present() {
		return nil, ""
	}
	if e.cache != nil {
		if names, why, ok := e.cache.dir(dir, st); ok {
			return names, why
		}
	}
	names, why := updater.ListArtifacts(dir, base)
	if e.cache != nil && st.Settled(e.now()) {
		if after, err := fsread.LstatStamp(dir); err == nil && after == st {
			e.cache.rememberDir(dir, st, names, why)
		}
	}
	return names, why
}

// markerCache keeps what a classification of an unchanged marker would
// read again for nothing: the parse of the marker (while its stamp is the
// same), the start time of its process (while the platform can tell it is
// the same process) and the artifacts beside it (while its directory's
// stamp is the same). A stale check then costs an lstat of the marker and
// its directory and a liveness probe. The zero markerCache is empty and
// ready; it is safe for concurrent use.
type markerCache struct {
	mu      sync.Mutex // protects the fields below
	path    string
	stamp   fsread.Stamp
	pid     int64
	started float64
	ids     updater.Identities
	proc    *procHandle          // the marker's process, where the platform keeps one
	closed  bool                 // its guard was closed: no process handle is kept
	dirs    map[string]cachedDir // listings of marker directories, by path
}

// cachedDir is the artifacts found beside a marker while the directory's
// stamp is stamp.
type cachedDir struct {
	stamp fsread.Stamp
	names []string
	why   string
}

// parsed returns the cached parse of the marker at path, when its stamp is
// still st.
func (c *markerCache) parsed(path string, st fsread.Stamp) (pid int64, started float64, ids updater.Identities, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path != path || c.stamp != st || !st.Present() {
		return 0, 0, ids, false
	}
	return c.pid, c.started, c.ids, true
}

// remember keeps the parse of the marker at path, stamped st.
func (c *markerCache) remember(path string, st fsread.Stamp, pid int64, started float64, ids updater.Identities) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pid != pid && c.proc != nil {
		c.proc.close()
		c.proc = nil
	}
	c.path, c.stamp, c.pid, c.started, c.ids = path, st, pid, started, ids
}

// probe is e's probe, answered from the process handle while it says the
// same process still lives.
func (c *markerCache) probe(e *markerEnv, pid int64) procInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.proc; h != nil && h.pid == pid {
		if h.alive() {
			return procInfo{State: processAlive, Start: h.start}
		}
		h.close()
		c.proc = nil
		return procInfo{State: processGone}
	}
	info := e.probe(pid)
	if info.State == processAlive && !info.Start.IsZero() && !c.closed {
		if h := openProc(pid, info.Start); h != nil {
			if c.proc != nil {
				c.proc.close()
			}
			c.proc = h
		}
	}
	return info
}

// close closes the process handle and keeps none from now on: the
// guard was closed.
func (c *markerCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.proc != nil {
		c.proc.close()
		c.proc = nil
	}
}

// dir returns the cached artifacts of dir, when its stamp is still st.
func (c *markerCache) dir(dir string, st fsread.Stamp) ([]string, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.dirs[dir]
	if !ok || d.stamp != st {
		return nil, "", false
	}
	return d.names, d.why, true
}

// rememberDir keeps the artifacts of dir, stamped st.
func (c *markerCache) rememberDir(dir string, st fsread.Stamp, names []string, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs == nil || len(c.dirs) > 64 {
		c.dirs = make(map[string]cachedDir)
	}
	c.dirs[dir] = cachedDir{st, names, why}
}

// markerJudge is the classification a claim of the marker obeys
// (updater.Judge): a claim replaces only a marker a guard reads as stale,
// and yields to all a guard does not read as absent.
type markerJudge struct {
	e      *markerEnv
	maxAge time.Duration
}

// Read classifies the marker at path: its state's word and why.
func (j markerJudge) Read(path string) (state, reason string) {
	m := j.e.read(path, j.maxAge)
	return string(m.State), m.Reason
}

// Marker reads and judges the marker at path, with what lies beside it.
func (j markerJudge) Marker(path string) (body []byte, stale bool, held string) {
	m, body := j.e.readBody(path, j.maxAge)
	switch m.State {
	case MarkerAbsent:
		return nil, false, ""
	case MarkerAbandoned:
		if body != nil {
			return body, true, ""
		}
	}
	return body, false, fmt.Sprintf("%s (%s)", m.State, m.Reason)
}

// Beside judges what lies beside the marker at path alone.
func (j markerJudge) Beside(path string) string {
	if a := j.e.artifacts(path); a.State != MarkerAbsent {
		return a.Reason
	}
	return ""
}

func init() {
	// The command-line tool claims and reads markers as a guard reads
	// them: package updater cannot import this one.
	updater.GuardJudge = func(maxAge time.Duration) updater.Judge {
		return markerJudge{systemMarkers, maxAge}
	}
}
