//go:build unix

package gittest

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// ExitedPID returns the ID of a child that has exited but is not reaped
// until the test ends: a zombie, whose ID no other process can take
// meanwhile. Where the platform cannot wait for an exit without reaping,
// the child is taken for exited once gone (the caller's process probe)
// says so, and where a zombie cannot be told from a live process, the
// test is skipped.
func ExitedPID(t testing.TB, gone func(pid int) bool) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exit 0")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Wait() })
	awaitExit(t, cmd.Process.Pid, gone)
	return cmd.Process.Pid
}
