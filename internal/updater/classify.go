package updater

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

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

// Life is what an update marker proves of the update it names, ordered
// by how much it says an update may be under way: of the markers of
// several homes, the greatest counts. Package runtimeguard names each in
// the words of its JSON contract (MarkerState).
type Life int

// What a marker proves of its update.
const (
	// NoUpdate: nothing at the marker's path proves an update (no file,
	// or a release whose process is gone).
	NoUpdate Life = iota
	// Ended: the update it names provably ended (its process is gone,
	// its ID was reused, or it is over the age limit).
	Ended
	// Unsure: whether the update it names lives cannot be told.
	Unsure
	// Live: the update it names lives.
	Live
)

// String says what l proves, in a few words: "a live update".
func (l Life) String() string {
	switch l {
	case NoUpdate:
		return "no update"
	case Ended:
		return "an ended update"
	case Unsure:
		return "an update that may live"
	case Live:
		return "a live update"
	}
	return fmt.Sprintf("Life(%d)", int(l))
}

// Verdict is the classification of a marker, with the reason for it.
type Verdict struct {
	Life Life
	// Reason says why the state is what it is, in a few words: "no file",
	// "process 123 is alive", "a symbolic link", "over the age limit".
	Reason string
}

// ClassifyMarker classifies the marker at path with the age limit maxAge. It never
// blocks, never follows a symbolic link, never reads more than
// MaxMarkerBytes+1 bytes and never changes the file. An empty path
// (no home directory known) is unknown.
//
// An updater that releases its marker by renaming it aside first (to
// <marker>.cas-release-<pid>-<id>, then reading and removing it) has not
// finished while that process lives: such a release in flight makes the
// marker active; one whose process is gone counts for nothing. Any other
// <marker>.cas-* artifact is an updater's cleanup left unresolved, and
// unknown.
func (e *Env) ClassifyMarker(path string, maxAge time.Duration) Verdict {
	m, _ := e.readBody(path, maxAge)
	return m
}

// readBody is ClassifyMarker, with the bytes of the marker file it judged: nil when
// none were read (no file, one that proves nothing, or a parse the cache
// kept). Beside an active marker it reads nothing more.
func (e *Env) readBody(path string, maxAge time.Duration) (Verdict, []byte) {
	if path == "" {
		return Verdict{Unsure, "no home directory is known"}, nil
	}
	f := MarkerFacts{Path: path}
	e.readFileFacts(&f)
	if m := e.judgeFile(&f, maxAge); m.Life == Live {
		return m, f.body
	}
	e.readArtifactFacts(&f)
	return e.JudgeMarker(&f, maxAge), f.body
}

// MarkerFacts is what a read of a marker and of the artifacts beside it
// found: all that its classification takes from files. The rules that
// move without any file changing (the age limit with the clock, a
// process's liveness) are applied by JudgeMarker on each use, so that a caller
// may keep the facts while it knows none of those files changed.
type MarkerFacts struct {
	// Path is the marker's path, "" when no home directory is known.
	Path string
	// file is the state of a marker file that was not parsed (absent, or
	// unknown and why); parsed, pid and started are the parse of one
	// that was, body the bytes read (nil when the cache kept the parse).
	file    Verdict
	parsed  bool
	pid     int64
	started float64
	ids     Identities // the lines after the first two
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

// ReadMarker reads the marker at path and the artifacts beside it, as
// ClassifyMarker does (never blocking, following no link, reading at most
// MaxMarkerBytes+1 bytes), and applies no rule of time or
// liveness. An empty path (no home directory known) reads nothing.
func (e *Env) ReadMarker(path string) MarkerFacts {
	f := MarkerFacts{Path: path}
	if path == "" {
		return f
	}
	e.readFileFacts(&f)
	e.readArtifactFacts(&f)
	return f
}

// readFileFacts reads the marker file of f.
func (e *Env) readFileFacts(f *MarkerFacts) {
	var st fsread.Stamp
	if e.Cache != nil {
		var err error
		if st, err = fsread.LstatStamp(f.Path); err == nil && st.Present() {
			if pid, started, ids, ok := e.Cache.parsed(f.Path, st); ok {
				f.pid, f.started, f.ids, f.parsed = pid, started, ids, true
				return
			}
		}
	}
	body, kind, why := e.Open(f.Path, MaxMarkerBytes)
	switch kind {
	case FileAbsent:
		f.file = Verdict{NoUpdate, "no file"}
		return
	case FileUnusable:
		f.file = Verdict{Unsure, why}
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
	pid, started, ok := ParseMarker(body)
	if !ok {
		f.file = Verdict{Unsure, "not a process ID and a time on two lines of UTF-8"}
		return
	}
	ids := ParseIdentities(body)
	if ids.HasCreated && !secondFormatLines(body) {
		// The updater's own format, whose reader takes nothing else:
		// malformed, never judged by what a looser parse made of it.
		f.file = Verdict{Unsure, "a marker of the second format whose process ID or time is not ASCII digits within 32 and 64 bits"}
		return
	}
	if e.Cache != nil && st.Present() && st.Settled(e.Now()) {
		// The stamp is from before the read, and old enough that a
		// rewrite after it changes it (Git's racy rule).
		e.Cache.remember(f.Path, st, pid, started, ids)
	}
	f.pid, f.started, f.ids, f.parsed = pid, started, ids, true
}

// readArtifactFacts lists the artifacts beside the marker of f and stamps
// each.
func (e *Env) readArtifactFacts(f *MarkerFacts) {
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
func (e *Env) judgeFile(f *MarkerFacts, maxAge time.Duration) Verdict {
	if f.Path == "" {
		return Verdict{Unsure, "no home directory is known"}
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
// EmptyMarkerGrace it is a claim being published (a writer
// without hard links creates the file, then writes it), and active; older,
// a claim never finished, which the updater takes over: stale.
func (e *Env) judgeEmpty(mtime time.Time) Verdict {
	age := e.Now().Sub(mtime)
	if age < EmptyMarkerGrace {
		return Verdict{Live, fmt.Sprintf("empty, written %v ago: a claim being published", age.Round(time.Millisecond))}
	}
	return Verdict{Ended, fmt.Sprintf("empty, and older than %v: a claim never finished", EmptyMarkerGrace)}
}

// incarnation is whether process pid, created at the recorded creation
// time, runs: alive when a process of that ID runs and its creation time
// lies within CreateTimeTolerance of the one recorded; dead when
// none runs or it is another (a reused ID); unprovable (ok false) when
// its liveness or creation time cannot be told here. Process ID 0 is no
// process. The reading process's own ID is the reader only within
// OwnCreateTimeEpsilon of its own creation time, and never where that
// cannot be told: any other is a previous incarnation of the ID.
func (e *Env) incarnation(pid int64, created float64, owner bool) (alive bool, why string, ok bool) {
	if pid == 0 {
		return false, "process ID 0 names no process", true
	}
	if pid < 0 || pid > maxPID {
		return false, "", false
	}
	if self := e.self(); pid == self.PID {
		switch {
		case !self.HasCreated:
			return false, fmt.Sprintf("process %d is this one, whose creation time cannot be told here: the marker's is a previous incarnation's", pid), true
		case math.Abs(self.Created-created) > OwnCreateTimeEpsilon.Seconds():
			return false, fmt.Sprintf("process %d is this one, created at %.3f, not at %.3f: a previous incarnation of its ID", pid, self.Created, created), true
		}
		return true, fmt.Sprintf("process %d, created at %.3f, is this one", pid, created), true
	}
	info := e.Probe(pid)
	if owner {
		info = e.probeCached(pid)
	}
	switch info.State {
	case ProcessGone:
		return false, fmt.Sprintf("process %d is gone", pid), true
	case ProcessAlive:
		if info.Created.IsZero() {
			return false, "", false
		}
		start := float64(info.Created.UnixNano()) / 1e9
		if math.Abs(start-created) > CreateTimeTolerance.Seconds() {
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
func (e *Env) classifyIdentities(pid int64, started float64, ids *Identities, maxAge time.Duration) (Verdict, bool) {
	if !ids.HasCreated {
		return e.classifyFirstFormatDelegate(pid, started, ids, maxAge)
	}
	owner, ownerWhy, ownerKnown := e.incarnation(pid, ids.Created, true)
	if owner {
		return Verdict{Live, "its owner " + ownerWhy}, true
	}
	d := ids.Delegate
	if d.PID != 0 {
		delegate, delegateWhy, known := e.incarnation(d.PID, d.Created, false)
		if delegate {
			if !ownerKnown {
				ownerWhy = fmt.Sprintf("whether its owner %d runs cannot be told", pid)
			}
			return Verdict{Live, fmt.Sprintf("its delegate %s (%s)", delegateWhy, ownerWhy)}, true
		}
		if !known {
			if !ownerKnown {
				return Verdict{}, false
			}
			m := e.classify(d.PID, started, maxAge)
			m.Reason = "its owner " + ownerWhy + "; its delegate: " + m.Reason
			return m, true
		}
		if ownerKnown {
			return Verdict{Ended, fmt.Sprintf("its owner %s, and its delegate %s", ownerWhy, delegateWhy)}, true
		}
		return Verdict{}, false
	}
	if !ownerKnown {
		return Verdict{}, false
	}
	return Verdict{Ended, "its owner " + ownerWhy}, true
}

// classifyFirstFormatDelegate judges a marker without the owner's creation
// time that names a delegate, as the updater does: the owner by the first
// format's rules (the age limit), the delegate by its identity, however old
// the marker; it is active while either runs. Without a delegate, ok is
// false: the first format's rules alone judge it.
func (e *Env) classifyFirstFormatDelegate(pid int64, started float64, ids *Identities, maxAge time.Duration) (Verdict, bool) {
	d := ids.Delegate
	if d.PID == 0 {
		return Verdict{}, false
	}
	owner := e.classify(pid, started, maxAge)
	if owner.Life == Live {
		return owner, true
	}
	delegate, why, known := e.incarnation(d.PID, d.Created, false)
	switch {
	case delegate:
		return Verdict{Live, fmt.Sprintf("its delegate %s (its owner: %s)", why, owner.Reason)}, true
	case known:
		owner.Reason = "its owner: " + owner.Reason + "; its delegate " + why
		return owner, true
	}
	m := e.classify(d.PID, started, maxAge)
	if m.Life == Ended {
		m = owner
	}
	m.Reason = fmt.Sprintf("its owner: %s; its delegate %d: %s", owner.Reason, d.PID, m.Reason)
	return m, true
}

// JudgeMarker classifies the facts f with the age limit maxAge, now: the
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
func (e *Env) JudgeMarker(f *MarkerFacts, maxAge time.Duration) Verdict {
	m := e.judgeFile(f, maxAge)
	if m.Life == Live || f.Path == "" {
		return m
	}
	a := e.judgeArtifacts(f)
	if a.Life == Live || a.Life == Unsure && m.Life != Unsure {
		return a
	}
	return m
}

// judgeArtifacts classifies the artifacts of f: a release whose process
// lives is active, an artifact that proves nothing (or a directory that
// cannot be searched) unknown, and otherwise the answer is absent.
func (e *Env) judgeArtifacts(f *MarkerFacts) Verdict {
	if f.dirWhy != "" {
		return Verdict{Unsure, f.dirWhy}
	}
	result := Verdict{Life: NoUpdate}
	for i := range f.artifacts {
		m := e.judgeArtifact(&f.artifacts[i])
		switch {
		case m.Life == Live:
			return m
		case m.Life == Unsure && result.Life != Unsure:
			result = m
		}
	}
	return result
}

// artifacts classifies the artifacts beside the marker at path (see
// judgeArtifacts).
func (e *Env) artifacts(path string) Verdict {
	f := MarkerFacts{Path: path}
	e.readArtifactFacts(&f)
	return e.judgeArtifacts(&f)
}

// classify judges a parsed marker in the order of the hermes-webui guard: a
// time that is not finite or lies in the future is unknown; so is a
// process ID of zero or less, whatever the marker's age; then the age
// limit; then a process ID too large for this platform is unknown; then
// liveness.
func (e *Env) classify(pid int64, started float64, maxAge time.Duration) Verdict {
	nowSec := float64(e.Now().UnixNano()) / 1e9
	switch {
	case math.IsNaN(started) || math.IsInf(started, 0):
		return Verdict{Unsure, "its time is not finite"}
	case started > nowSec:
		return Verdict{Unsure, "its time lies in the future"}
	case pid <= 0:
		return Verdict{Unsure, fmt.Sprintf("process ID %d names no process", pid)}
	case nowSec-started > maxAge.Seconds():
		return Verdict{Ended, fmt.Sprintf("older than %v", maxAge)}
	case pid > maxPID:
		return Verdict{Unsure, fmt.Sprintf("process ID %d cannot be asked about here", pid)}
	}
	info := e.probeCached(pid)
	switch info.State {
	case ProcessGone:
		return Verdict{Ended, fmt.Sprintf("process %d is gone", pid)}
	case ProcessAlive:
		if !info.Start.IsZero() {
			writtenAt := time.Unix(0, int64(started*1e9))
			if info.Start.After(writtenAt.Add(pidReuseSlack)) {
				return Verdict{Ended, fmt.Sprintf("process %d started after the marker was written: its ID was reused", pid)}
			}
		}
		return Verdict{Live, fmt.Sprintf("process %d is alive", pid)}
	}
	return Verdict{Unsure, fmt.Sprintf("whether process %d lives cannot be told", pid)}
}

// probeCached is e.Probe, through the cache when there is one.
func (e *Env) probeCached(pid int64) ProcInfo {
	if e.Cache != nil {
		return e.Cache.probe(e, pid)
	}
	return e.Probe(pid)
}

// judgeArtifact judges one artifact beside a marker, now.
func (e *Env) judgeArtifact(a *artifactFact) Verdict {
	name := filepath.Base(a.path)
	pid, release := ReleasePID(a.suffix)
	switch {
	case !release:
		return Verdict{Unsure, fmt.Sprintf("%s is an updater's unresolved cleanup of the marker", name)}
	case pid <= 0:
		return Verdict{Unsure, fmt.Sprintf("%s names no process", name)}
	case pid > maxPID:
		return Verdict{Unsure, fmt.Sprintf("%s names process %d, which cannot be asked about here", name, pid)}
	}
	info := e.Probe(pid)
	switch info.State {
	case ProcessGone:
		return Verdict{Life: NoUpdate}
	case ProcessAlive:
		// A process that started after the rename (its change time) is
		// not the releaser: its ID was reused.
		if a.stamped && !info.Start.IsZero() && info.Start.After(a.changed.Add(pidReuseSlack)) {
			return Verdict{Life: NoUpdate}
		}
		return Verdict{Live, fmt.Sprintf("process %d is releasing the marker (%s): the update has not finished", pid, name)}
	}
	return Verdict{Unsure, fmt.Sprintf("whether process %d, releasing the marker, lives cannot be told", pid)}
}

// artifactNames lists the names of the artifacts beside the marker base in
// dir, through the cache while the directory's stamp is the same and
// settled.
func (e *Env) artifactNames(dir, base string) ([]string, string) {
	st, err := fsread.LstatStamp(dir)
	if err != nil {
		return nil, err.Error()
	}
	if !st.Present() {
		return nil, ""
	}
	if e.Cache != nil {
		if names, why, ok := e.Cache.dir(dir, st); ok {
			return names, why
		}
	}
	names, why := ListArtifacts(dir, base)
	if e.Cache != nil && st.Settled(e.Now()) {
		if after, err := fsread.LstatStamp(dir); err == nil && after == st {
			e.Cache.rememberDir(dir, st, names, why)
		}
	}
	return names, why
}

// markerJudge is the classification a claim of the marker obeys
// (Judge): a claim replaces only a marker a guard reads as stale,
// and yields to all a guard does not read as absent.
type markerJudge struct {
	e      *Env
	maxAge time.Duration
}

// Read classifies the marker at path.
func (j markerJudge) Read(path string) Verdict {
	return j.e.ClassifyMarker(path, j.maxAge)
}

// Marker reads and judges the marker at path, with what lies beside it.
func (j markerJudge) Marker(path string) (body []byte, stale bool, held string) {
	m, body := j.e.readBody(path, j.maxAge)
	switch m.Life {
	case NoUpdate:
		return nil, false, ""
	case Ended:
		if body != nil {
			return body, true, ""
		}
	}
	return body, false, fmt.Sprintf("%v (%s)", m.Life, m.Reason)
}

// Beside judges what lies beside the marker at path alone.
func (j markerJudge) Beside(path string) string {
	if a := j.e.artifacts(path); a.Life != NoUpdate {
		return a.Reason
	}
	return ""
}

// Judge is the classification of markers through e with the age limit
// maxAge, as a claim of the marker obeys it.
func (e *Env) Judge(maxAge time.Duration) Judge { return markerJudge{e, maxAge} }
