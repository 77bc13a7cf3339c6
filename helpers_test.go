package runtimeguard

import (
	"os"
	"testing"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// The shared harness under the names the tests use.
var (
	git       = gittest.Git
	tempDir   = gittest.TempDir
	writeFile = gittest.WriteFile
	initRepo  = gittest.Init
	commit    = gittest.Commit
	agentRepo = gittest.Agent
	resolved  = gittest.Resolved
)

// longTests is set by RUNTIMEGUARD_LONG (.ci/run sets it): the matrices
// of cases and check paths run every case on every path, and the loops
// their full length. Without it, each case of a matrix runs on one path,
// the paths taking turns (every case and every path is still run), and
// the loops are shorter, so that the README's test command stays within
// two minutes on a two-core machine.
var longTests = os.Getenv("RUNTIMEGUARD_LONG") != ""

// onPath reports whether case c of a matrix runs on path p of n.
func onPath(c, p, n int) bool { return longTests || c%n == p }

// loopLength is long with RUNTIMEGUARD_LONG, else short.
func loopLength(long, short int) int {
	if longTests {
		return long
	}
	return short
}

// testEnv is the system environment with a fixed process probe.
func testEnv(probe func(int64) updater.ProcInfo) *env {
	e := *systemEnv
	u := *e.upd
	e.upd = &u
	if probe != nil {
		u.Probe = probe
	}
	return &e
}

// The names of the Hermes updater's files, and the default message.
const (
	hermesMarker     = ".hermes-update-in-progress"
	hermesIncomplete = ".update-incomplete"
	hermesLazy       = ".lazy-refresh-incomplete"
	defaultMessage   = "Hermes Agent was updated on disk after Hermes WebUI loaded it. Restart Hermes WebUI manually to load the new code."
)

// readMarker classifies the marker at path as a guard with the default
// options does.
func readMarker(path string) MarkerState {
	return markerState(updater.System.ClassifyMarker(path, DefaultMaxMarkerAge).Life)
}

// inspectRevision is the revision gitread.Inspect finds for module.
func inspectRevision(module string) (string, error) {
	c, err := gitread.Inspect(module)
	return c.Revision, err
}

// children are the helper processes this test binary can be run as,
// besides the harness's own (see gittest.RunChild), by the variable that
// names each: a platform's test file adds its own.
var children = map[string]func(value string) int{}

// cleanups are directories made once per run and shared by tests (test
// fixtures that are copied per case), removed when the run ends.
var cleanups []string

func TestMain(m *testing.M) {
	gittest.RunChild(children)
	code := m.Run()
	for _, dir := range cleanups {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// processGone reports whether the updater's probe finds process pid gone.
func processGone(pid int) bool {
	return updater.ProbeProcess(int64(pid)).State == updater.ProcessGone
}
