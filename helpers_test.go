package runtimeguard

import (
	"fmt"
	"testing"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
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

// writeMarker writes an update marker for pid, started at the given time.
func writeMarker(t testing.TB, path string, pid int, started time.Time) {
	t.Helper()
	writeFile(t, path, fmt.Sprintf("%d\n%.6f\n", pid, float64(started.UnixNano())/1e9))
}

// testEnv is the system environment with a fixed process probe.
func testEnv(probe func(int) procInfo) *env {
	e := *systemEnv
	if probe != nil {
		e.probe = probe
	}
	return &e
}
