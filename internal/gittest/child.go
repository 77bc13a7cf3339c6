package gittest

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The variables that make a test binary one of the helper children of
// this package (see [RunChild]): WaitChildEnv a child that lives until its
// standard input closes, a process whose start time and liveness tests
// can observe; ExitChildEnv one that exits at once with the code it names.
const (
	WaitChildEnv = "RUNTIMEGUARD_WAIT_STDIN"
	ExitChildEnv = "RUNTIMEGUARD_EXIT_CODE"
)

// RunChild makes this process the helper child its environment names, if
// any, and never returns then: this package's own (WaitChildEnv,
// ExitChildEnv), or one of children, each named by its variable and run
// with its value, whose result is the exit code. A package's TestMain
// calls it first.
func RunChild(children map[string]func(value string) int) {
	if code := os.Getenv(ExitChildEnv); code != "" {
		n, _ := strconv.Atoi(code)
		os.Exit(n)
	}
	if os.Getenv(WaitChildEnv) != "" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	for env, run := range children {
		if v := os.Getenv(env); v != "" {
			os.Exit(run(v))
		}
	}
}

// LongChild starts a child process that lives until the test ends or it
// is killed: sleep where there is one, on Windows this test binary
// waiting on its standard input (its TestMain calls [RunChild]).
func LongChild(t testing.TB) *exec.Cmd {
	t.Helper()
	child, stdin := longChild(t)
	require.NoError(t, child.Start())
	t.Cleanup(func() {
		if stdin != nil {
			_ = stdin.Close()
		}
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	return child
}
