package runtimeguard

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
)

// MarkerName is the file name of the updater's in-progress marker inside
// the home directory ([Options.HomeDir]).
const MarkerName = ".hermes-update-in-progress"

// The recovery markers an interrupted update leaves in an install root.
const (
	// UpdateIncompleteName marks an install whose update did not finish.
	UpdateIncompleteName = ".update-incomplete"
	// LazyRefreshIncompleteName marks an install whose lazy dependency
	// refresh did not finish.
	LazyRefreshIncompleteName = ".lazy-refresh-incomplete"
)

// MaxMarkerBytes is the largest update marker that is read. A larger one is
// [MarkerUnknown]; at most MaxMarkerBytes+1 bytes of it are ever read.
const MaxMarkerBytes = 64 << 10

// DefaultMaxMarkerAge is the age past which an update marker is
// [MarkerStale] whatever its process: the zero [Options.MaxMarkerAge].
const DefaultMaxMarkerAge = 20 * time.Minute

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

// MarkerState classifies the updater's in-progress marker. Its values are
// the lower-case words of the JSON contract.
type MarkerState string

// The four marker states.
const (
	// MarkerAbsent: nothing exists at the marker path, not even a link.
	MarkerAbsent MarkerState = "absent"
	// MarkerActive: the marker is within the age limit and its process is
	// alive (a process that may not be signalled is alive).
	MarkerActive MarkerState = "active"
	// MarkerStale: the marker is older than the age limit, whatever its
	// process ID (zero, negative or too large for the platform too), its
	// process is gone, or its process ID now belongs to a process that
	// started after the marker was written.
	MarkerStale MarkerState = "stale"
	// MarkerUnknown: something is at the path but proves nothing: a link,
	// a FIFO, socket, device or directory, an unreadable, oversized or
	// malformed file, a time that is not finite or lies in the future, a
	// marker within the age limit whose process ID is zero, negative or too
	// large for the platform, or a process whose liveness cannot be
	// determined.
	MarkerUnknown MarkerState = "unknown"
)

// UpdateState is the diagnostic a [StaleError] carries: what can be
// observed of the updater. These are observations, not receipts: a missing
// marker does not prove that an update succeeded, since the updater removes
// it when it fails too.
type UpdateState string

// The five update states.
const (
	// UpdateUnverified: no marker and no recovery marker. Nothing says an
	// update is running, and nothing proves one finished.
	UpdateUnverified UpdateState = "unverified"
	// UpdateActive: an update is running now.
	UpdateActive UpdateState = "active"
	// UpdateStale: an update marker was left by an updater that is gone or
	// ran too long.
	UpdateStale UpdateState = "stale"
	// UpdateUnknown: the marker or an install root could not be read safely.
	UpdateUnknown UpdateState = "unknown"
	// UpdateIncomplete: a recovery marker says the install is incomplete.
	UpdateIncomplete UpdateState = "incomplete"
)

// ReadUpdateMarker classifies the update marker at path with the default age
// limit and the real clock. It never blocks, never follows a symbolic link,
// never reads more than [MaxMarkerBytes]+1 bytes and never changes the file.
// See [MarkerState] for what each answer means.
func ReadUpdateMarker(path string) MarkerState {
	return systemEnv.readMarker(path, DefaultMaxMarkerAge)
}

// fileKind is what the OS layer found at a marker path.
type fileKind int

const (
	fileRead     fileKind = iota // a small regular file, read whole
	fileAbsent                   // nothing at the path
	fileUnusable                 // something that proves nothing
)

// liveness is what a process probe learned.
type liveness int

const (
	livenessUnknown liveness = iota
	processAlive
	processGone
)

// procInfo is the answer of a process probe. start is the zero time when the
// platform cannot tell when the process started.
type procInfo struct {
	state liveness
	start time.Time
}

// env is the part of the environment a guard touches, injectable per
// instance so that tests can run in parallel.
type env struct {
	now func() time.Time
	// probe reports whether pid is alive and when it started.
	probe func(pid int) procInfo
	// openMarker reads a marker without following links or blocking; nil
	// where the platform has no such open, and the marker is never opened.
	openMarker func(path string) ([]byte, fileKind)
	// git is the file system the checkout is read from.
	git *gitread.FS
}

var systemEnv = &env{
	now:        time.Now,
	probe:      probeProcess,
	openMarker: safeOpenMarker,
	git:        gitread.System,
}

// readMarker classifies the marker at path (SPEC section 4).
func (e *env) readMarker(path string, maxAge time.Duration) MarkerState {
	var body []byte
	var kind fileKind
	if e.openMarker == nil {
		kind = lstatOnly(path)
	} else {
		body, kind = e.openMarker(path)
	}
	switch kind {
	case fileAbsent:
		return MarkerAbsent
	case fileUnusable:
		return MarkerUnknown
	}
	pid, started, ok := parseMarker(body)
	if !ok {
		return MarkerUnknown
	}
	return e.classify(pid, started, maxAge)
}

// lstatOnly is the classification of a platform without a safe open: it
// never opens the marker, so a present marker proves nothing.
func lstatOnly(path string) fileKind {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return fileAbsent
	}
	return fileUnusable
}

// parseMarker parses a marker body: line 1 a process ID, line 2 the Unix
// time the update started, in seconds, read as the hermes-webui guard reads
// them, with Python's int() and float() ([pyInt], [pyFloat]). It reports ok
// false for anything that is not UTF-8, has fewer than two lines, or holds a
// value that does not parse. Whether the values make sense is for
// [env.classify]: pid may be any integer (clamped to int64), started an
// infinity or NaN.
func parseMarker(body []byte) (pid int64, started float64, ok bool) {
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
// time that is not finite or lies in the future is unknown; then the age
// limit, whatever the process ID; then a process ID this platform cannot ask
// about is unknown; then liveness.
func (e *env) classify(pid int64, started float64, maxAge time.Duration) MarkerState {
	now := e.now()
	nowSec := float64(now.UnixNano()) / 1e9
	if math.IsNaN(started) || math.IsInf(started, 0) || started > nowSec {
		return MarkerUnknown
	}
	if nowSec-started > maxAge.Seconds() {
		return MarkerStale
	}
	if pid <= 0 || pid > maxPID {
		return MarkerUnknown
	}
	info := e.probe(int(pid))
	switch info.state {
	case processGone:
		return MarkerStale
	case processAlive:
		if !info.start.IsZero() {
			writtenAt := time.Unix(0, int64(started*1e9))
			if info.start.After(writtenAt.Add(pidReuseSlack)) {
				return MarkerStale
			}
		}
		return MarkerActive
	}
	return MarkerUnknown
}

// installRoots lists the directories that may hold recovery markers: the
// source directory and, for an interpreter at <root>/venv/bin/python (or
// .venv, or Scripts on Windows; names compared without case), <root>. The
// interpreter path is used as given: a venv interpreter is often a link to a
// shared one, and resolving it would leave the install.
func installRoots(sourceDir, python string) []string {
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
		if abs, err := filepath.Abs(python); err == nil {
			python = abs
		}
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

// recoveryMarkers reports which recovery markers exist in roots, without
// following links. An error other than "does not exist" makes the answer
// unknowable: ok is false.
func recoveryMarkers(roots []string) (present []string, ok bool) {
	for _, root := range roots {
		for _, name := range [...]string{UpdateIncompleteName, LazyRefreshIncompleteName} {
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

// observe reads the marker and the recovery markers of roots and combines
// them (SPEC section 5). An empty markerPath is an unknown marker. The
// recovery markers are looked for whatever the marker's state, so that a
// diagnostic shows them.
func (e *env) observe(markerPath string, maxAge time.Duration, roots []string) Observation {
	o := Observation{MarkerPath: markerPath, Marker: MarkerUnknown, InstallRoots: roots}
	if markerPath != "" {
		o.Marker = e.readMarker(markerPath, maxAge)
	}
	present, ok := recoveryMarkers(roots)
	o.RecoveryMarkers = present
	o.State = combineUpdateState(o.Marker, len(present) > 0, ok)
	return o
}

// combineUpdateState is the table of SPEC section 5: an unknown marker or an
// unreadable root is unknown, a recovery marker incomplete, and otherwise
// the marker's own state, absent reading as unverified.
func combineUpdateState(marker MarkerState, incomplete, rootsRead bool) UpdateState {
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
	return UpdateStale
}
