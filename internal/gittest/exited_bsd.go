//go:build unix && !linux

package gittest

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ExitedPID returns the ID of a child that has exited but is not reaped
// until the test ends: a zombie, whose ID no other process can take
// meanwhile, once gone (the caller's process probe) says it is gone.
// Where a zombie cannot be told from a live process, the test is skipped.
func ExitedPID(t testing.TB, gone func(pid int) bool) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exit 0")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if gone(cmd.Process.Pid) {
			return cmd.Process.Pid
		}
	}
	t.Skip("an exited child cannot be told from a live one on this platform")
	return 0
}
