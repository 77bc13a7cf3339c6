//go:build windows

package updater

import (
	"io"
	"os"
	"strconv"
	"testing"
)

// waitChildEnv makes the test binary a child that lives until its standard
// input closes: a process whose start time and liveness tests can observe.
const waitChildEnv = "RUNTIMEGUARD_WAIT_STDIN"

// exitChildEnv makes the test binary a child that exits at once with the
// code it names.
const exitChildEnv = "RUNTIMEGUARD_EXIT_CODE"

func TestMain(m *testing.M) {
	if code := os.Getenv(exitChildEnv); code != "" {
		n, _ := strconv.Atoi(code)
		os.Exit(n)
	}
	if os.Getenv(waitChildEnv) != "" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
