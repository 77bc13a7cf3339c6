package updater

import (
	"fmt"
	"testing"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// The shared harness under the names the tests use.
var (
	tempDir   = gittest.TempDir
	writeFile = gittest.WriteFile
)

// The names of the Hermes updater's files.
const (
	markerName = ".hermes-update-in-progress"
	incomplete = ".update-incomplete"
	lazy       = ".lazy-refresh-incomplete"
)

// maxAge is the age limit of the tests' markers: the default of the
// guard's options.
const maxAge = 20 * time.Minute

// ReadUpdateMarker classifies the marker at path with the default age
// limit and the real clock.
func ReadUpdateMarker(path string) MarkerState {
	return System.ReadMarker(path, maxAge).State
}

// writeMarker writes an update marker for pid, started at the given time.
func writeMarker(t testing.TB, path string, pid int, started time.Time) {
	t.Helper()
	writeFile(t, path, fmt.Sprintf("%d\n%.6f\n", pid, float64(started.UnixNano())/1e9))
}

// testEnv is the system environment with a fixed process probe.
func testEnv(probe func(int64) ProcInfo) *Env {
	e := *System
	if probe != nil {
		e.Probe = probe
	}
	return &e
}
