//go:build unix

package runtimeguard

import (
	"os"
	"testing"
)

// cleanups are directories made once per run and shared by tests (test
// fixtures that are copied per case), removed when the run ends.
var cleanups []string

func TestMain(m *testing.M) {
	if mode := os.Getenv(inheritChildEnv); mode != "" {
		os.Exit(inheritChild(mode))
	}
	code := m.Run()
	if benchRepo.root != "" {
		os.RemoveAll(benchRepo.root)
	}
	for _, dir := range cleanups {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}
