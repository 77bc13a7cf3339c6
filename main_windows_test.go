//go:build windows

package runtimeguard

import (
	"io"
	"os"
	"testing"
)

// waitChildEnv makes the test binary a child that lives until its standard
// input closes: a process whose start time and liveness tests can observe.
const waitChildEnv = "RUNTIMEGUARD_WAIT_STDIN"

func TestMain(m *testing.M) {
	if os.Getenv(waitChildEnv) != "" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
