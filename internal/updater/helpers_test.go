package updater

import (
	"os"
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

// testEnv is a copy of the system environment, for a test to change.
func testEnv() *Env {
	e := *System
	return &e
}

// defaultMaxAge is the age limit of a guard with the default options
// (runtimeguard.DefaultMaxMarkerAge).
const defaultMaxAge = 20 * time.Minute

// probedEnv is a copy of the system environment with a fixed process
// probe.
func probedEnv(probe func(int64) ProcInfo) *Env {
	e := testEnv()
	e.Probe = probe
	return e
}

// readMarker classifies the marker at path as a guard with the default
// options does.
func readMarker(path string) Life {
	return System.ClassifyMarker(path, defaultMaxAge).Life
}

// children are the helper processes this test binary can be run as,
// besides the harness's own (see gittest.RunChild), by the variable that
// names each: a platform's test file adds its own.
var children = map[string]func(value string) int{}

func TestMain(m *testing.M) {
	gittest.RunChild(children)
	os.Exit(m.Run())
}

// processGone reports whether the probe finds process pid gone.
func processGone(pid int) bool {
	return ProbeProcess(int64(pid)).State == ProcessGone
}
