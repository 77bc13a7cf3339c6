package updater

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// MaxMarkerBytes is the largest update marker that is read; at most one
// byte more is ever read.
const MaxMarkerBytes = 64 << 10

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

// MarkerState classifies the updater's in-progress marker: the lower-case
// words of the JSON contract.
type MarkerState string

// The four marker states.
const (
	Absent  MarkerState = "absent"
	Active  MarkerState = "active"
	Stale   MarkerState = "stale"
	Unknown MarkerState = "unknown"
)

// ProbeProcess reports whether pid is alive and, where the platform can
// tell, when it started. A process ID out of the platform's range is
// unknown, never truncated into another.
func ProbeProcess(pid int64) ProcInfo {
	if pid <= 0 || pid > maxPID {
		return ProcInfo{}
	}
	return probeProcess(pid)
}

// Marker is the classification of a marker, with the reason for it.
type Marker struct {
	State MarkerState
	// Reason says why the state is what it is, in a few words: "no file",
	// "process 123 is alive", "a symbolic link", "over the age limit".
	Reason string
}

// FileKind is what a safe open found at a path.
type FileKind int

// The answers of a safe open.
const (
	FileRead     FileKind = iota // a small regular file, read whole
	FileAbsent                   // nothing at the path, not even a link
	FileUnusable                 // something that proves nothing
)

// Liveness is what a process probe learned.
type Liveness int

// The answers of a process probe.
const (
	LivenessUnknown Liveness = iota
	ProcessAlive
	ProcessGone
)

// ProcInfo is the answer of a process probe. Start is the zero time when
// the platform cannot tell when the process started.
type ProcInfo struct {
	State Liveness
	Start time.Time
}

// Env is the part of the environment the updater's files are read
// through, replaceable per instance so that tests can run in parallel.
type Env struct {
	Now func() time.Time
	// Probe reports whether pid is alive and when it started.
	Probe func(pid int64) ProcInfo
	// Open reads a small file without following links or blocking: at
	// most limit+1 bytes, a regular file only, and why not when it is not
	// one (see SafeOpen).
	Open func(path string, limit int64) (body []byte, kind FileKind, why string)
	// Cache, when not nil, spares a classification of an unchanged marker
	// its reads.
	Cache *Cache
}

// System is the real environment.
var System = &Env{Now: time.Now, Probe: ProbeProcess, Open: SafeOpen}

// ReadMarker classifies the marker at path with the age limit maxAge. It
// never blocks, never follows a symbolic link, never reads more than
// MaxMarkerBytes+1 bytes and never changes the file. An empty path (no home
// directory known) is unknown.
//
// An updater that releases its marker by renaming it aside first (to
// <marker>.cas-release-<pid>-<id>, then reading and removing it) has not
// finished while that process lives: such a release in flight makes the
// marker active; one whose process is gone counts for nothing. Any other
// <marker>.cas-* artifact is an updater's cleanup left unresolved, and
// unknown.
func (e *Env) ReadMarker(path string, maxAge time.Duration) Marker {
	if path == "" {
		return Marker{Unknown, "no home directory is known"}
	}
	m := e.readMarkerFile(path, maxAge)
	if m.State == Active {
		return m
	}
	return withArtifacts(m, e.markerArtifacts(path))
}

// withArtifacts is the classification of a marker file m that is not
// active beside that of its artifacts a: a live release makes it active,
// and an artifact that proves nothing makes a marker that proves
// something unknown.
func withArtifacts(m, a Marker) Marker {
	if a.State == Active || a.State == Unknown && m.State != Unknown {
		return a
	}
	return m
}

// readMarkerFile classifies the marker file at path alone.
func (e *Env) readMarkerFile(path string, maxAge time.Duration) Marker {
	m, pid, started, parsed := e.readMarkerFileFacts(path)
	if !parsed {
		return m
	}
	return e.classify(pid, started, maxAge)
}

// readMarkerFileFacts reads the marker file at path: its parse (parsed
// true), or the state that needs no rule of time or liveness (absent, or
// unknown and why).
func (e *Env) readMarkerFileFacts(path string) (m Marker, pid int64, started float64, parsed bool) {
	var st fsread.Stamp
	if e.Cache != nil {
		var err error
		if st, err = fsread.LstatStamp(path); err == nil && st.Present() {
			if pid, started, ok := e.Cache.parsed(path, st); ok {
				return Marker{}, pid, started, true
			}
		}
	}
	body, kind, why := e.Open(path, MaxMarkerBytes)
	switch kind {
	case FileAbsent:
		return Marker{Absent, "no file"}, 0, 0, false
	case FileUnusable:
		return Marker{Unknown, why}, 0, 0, false
	}
	pid, started, ok := ParseMarker(body)
	if !ok {
		return Marker{Unknown, "not a process ID and a time on two lines of UTF-8"}, 0, 0, false
	}
	if e.Cache != nil && st.Present() && st.Settled(e.Now()) {
		// The stamp is from before the read, and old enough that a
		// rewrite after it changes it (Git's racy rule).
		e.Cache.remember(path, st, pid, started)
	}
	return Marker{}, pid, started, true
}

// probeCached is Probe, through the cache when there is one.
func (e *Env) probeCached(pid int64) ProcInfo {
	if e.Cache != nil {
		return e.Cache.probe(e, pid)
	}
	return e.Probe(pid)
}

// lstatOnly is the open of a platform without a safe one: it never opens
// the file, so nothing at the path is absent and anything there proves
// nothing.
func lstatOnly(path string, _ int64) ([]byte, FileKind, string) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, FileAbsent, ""
	}
	return nil, FileUnusable, "present, and this platform cannot open it safely"
}

// ParseMarker parses a marker body: line 1 a process ID, line 2 the Unix
// time the update started, in seconds, read as the hermes-webui guard reads
// them, with Python's int() and float() (pyInt, pyFloat). It reports ok
// false for anything that is not UTF-8, has fewer than two lines, or holds
// a value that does not parse. Whether the values make sense is for the
// classification: pid may be any integer (clamped to int64), started an
// infinity or NaN.
func ParseMarker(body []byte) (pid int64, started float64, ok bool) {
	if len(body) > MaxMarkerBytes || !utf8.Valid(body) {
		return 0, 0, false
	}
	first, rest, found := strings.Cut(string(body), "\n")
	if !found || rest == "" {
		return 0, 0, false
	}
	second, _, _ := strings.Cut(rest, "\n")
	pid, ok = pyInt(first)
	if !ok {
		return 0, 0, false
	}
	started, ok = pyFloat(second)
	if !ok {
		return 0, 0, false
	}
	return pid, started, true
}

// classify judges a parsed marker in the order of the hermes-webui guard: a
// time that is not finite or lies in the future is unknown; so is a
// process ID of zero or less, whatever the marker's age; then the age
// limit; then a process ID too large for this platform is unknown; then
// liveness.
func (e *Env) classify(pid int64, started float64, maxAge time.Duration) Marker {
	nowSec := float64(e.Now().UnixNano()) / 1e9
	switch {
	case math.IsNaN(started) || math.IsInf(started, 0):
		return Marker{Unknown, "its time is not finite"}
	case started > nowSec:
		return Marker{Unknown, "its time lies in the future"}
	case pid <= 0:
		return Marker{Unknown, fmt.Sprintf("process ID %d names no process", pid)}
	case nowSec-started > maxAge.Seconds():
		return Marker{Stale, fmt.Sprintf("older than %v", maxAge)}
	case pid > maxPID:
		return Marker{Unknown, fmt.Sprintf("process ID %d cannot be asked about here", pid)}
	}
	info := e.probeCached(pid)
	switch info.State {
	case ProcessGone:
		return Marker{Stale, fmt.Sprintf("process %d is gone", pid)}
	case ProcessAlive:
		if !info.Start.IsZero() {
			writtenAt := time.Unix(0, int64(started*1e9))
			if info.Start.After(writtenAt.Add(pidReuseSlack)) {
				return Marker{Stale, fmt.Sprintf("process %d started after the marker was written: its ID was reused", pid)}
			}
		}
		return Marker{Active, fmt.Sprintf("process %d is alive", pid)}
	}
	return Marker{Unknown, fmt.Sprintf("whether process %d lives cannot be told", pid)}
}

// InstallRoots lists the directories that may hold recovery markers: the
// source directory and, for an interpreter at <root>/venv/bin/python (or
// .venv, or Scripts on Windows; names compared without case), <root>. The
// interpreter path is used as given, made absolute once by the caller (the
// guard's options are resolved at New): a venv interpreter is often a link
// to a shared one, and resolving its links would leave the install.
func InstallRoots(sourceDir, python string) []string {
	var roots []string
	add := func(dir string) {
		if dir == "" {
			return
		}
		dir = filepath.Clean(dir)
		for _, r := range roots {
			if r == dir {
				return
			}
		}
		roots = append(roots, dir)
	}
	add(sourceDir)
	if python != "" {
		bin := filepath.Dir(python)
		venv := filepath.Dir(bin)
		b, v := filepath.Base(bin), filepath.Base(venv)
		if (strings.EqualFold(b, "bin") || strings.EqualFold(b, "Scripts")) &&
			(strings.EqualFold(v, "venv") || strings.EqualFold(v, ".venv")) {
			add(filepath.Dir(venv))
		}
	}
	return roots
}

// RecoveryMarkers reports which of the recovery markers names exist in
// roots, without following links. An error other than "does not exist"
// makes the answer unknowable: ok is false.
func RecoveryMarkers(roots, names []string) (present []string, ok bool) {
	for _, root := range roots {
		for _, name := range names {
			p := filepath.Join(root, name)
			_, err := os.Lstat(p)
			switch {
			case err == nil:
				present = append(present, p)
			case !errors.Is(err, fs.ErrNotExist):
				return present, false
			}
		}
	}
	return present, true
}
