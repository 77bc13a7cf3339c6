package gittest

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// ExitedPID returns the ID of a child that has exited but is not reaped
// until the test ends: a zombie, whose ID no other process can take
// meanwhile. (gone is for the platforms where a zombie is told from a
// live process by the caller's probe: not here.)
func ExitedPID(t testing.TB, gone func(pid int) bool) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exit 0")
	require.NoError(t, cmd.Start())
	var info unix.Siginfo
	require.NoError(t, unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil))
	t.Cleanup(func() { _ = cmd.Wait() })
	return cmd.Process.Pid
}
