package updater

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// MarkerFacts is what a read of a marker and of the artifacts beside it
// found: all that its classification takes from files. The rules that
// move without any file changing, the age limit with the clock and a
// process's liveness, are applied by JudgeMarker on each use, so that a
// caller may keep the facts while it knows none of those files changed.
// ReadMarker is JudgeMarker of ReadMarkerFacts, but for the artifacts it
// does not read beside an active marker.
type MarkerFacts struct {
	// Path is the marker's path.
	Path string
	// file is the state of a marker file that was not parsed (absent, or
	// unknown and why); parsed, pid and started are the parse of one that
	// was.
	file    Marker
	parsed  bool
	pid     int64
	started float64
	// dirWhy is why the marker's directory could not be searched for
	// artifacts, or "".
	dirWhy    string
	artifacts []artifactFacts
}

// artifactFacts is one artifact beside the marker: its path, its name
// less the marker's, and its change time when lstat found it.
type artifactFacts struct {
	path, suffix string
	changed      time.Time
	stamped      bool
}

// ReadMarkerFacts reads the marker at path and the artifacts beside it,
// as ReadMarker does (never blocking, following no link, reading at most
// MaxMarkerBytes+1 bytes), and applies no rule of time or liveness. An
// empty path (no home directory known) reads nothing.
func (e *Env) ReadMarkerFacts(path string) MarkerFacts {
	f := MarkerFacts{Path: path}
	if path == "" {
		f.file = Marker{Unknown, "no home directory is known"}
		return f
	}
	f.file, f.pid, f.started, f.parsed = e.readMarkerFileFacts(path)
	dir, base := filepath.Split(path)
	names, why := e.artifactNames(filepath.Clean(dir), base)
	if why != "" {
		f.dirWhy = "the marker's directory cannot be searched: " + why
		return f
	}
	for _, name := range names {
		a := artifactFacts{path: filepath.Join(dir, name), suffix: strings.TrimPrefix(name, base)}
		if st, err := fsread.LstatStamp(a.path); err == nil && st.Present() {
			a.changed, a.stamped = st.ChangedAt(), true
		}
		f.artifacts = append(f.artifacts, a)
	}
	return f
}

// JudgeMarker classifies the facts f with the age limit maxAge, now: the
// marker's time against the clock, and the liveness of the processes it
// and its artifacts name, asked again (through the cache's process handle
// where there is one: a poll, no file opened). Two calls on the same facts
// differ only as the clock and those processes moved.
func (e *Env) JudgeMarker(f *MarkerFacts, maxAge time.Duration) Marker {
	m := f.file
	if f.parsed {
		m = e.classify(f.pid, f.started, maxAge)
	}
	if m.State == Active || f.Path == "" {
		return m
	}
	if f.dirWhy != "" {
		return withArtifacts(m, Marker{Unknown, f.dirWhy})
	}
	a := Marker{State: Absent}
	for i := range f.artifacts {
		af := &f.artifacts[i]
		am := e.judgeArtifact(af.path, af.suffix, func() (time.Time, bool) { return af.changed, af.stamped })
		switch {
		case am.State == Active:
			return withArtifacts(m, am)
		case am.State == Unknown && a.State != Unknown:
			a = am
		}
	}
	return withArtifacts(m, a)
}
