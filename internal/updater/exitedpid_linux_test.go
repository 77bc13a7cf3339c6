//go:build linux

package updater

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// exitedPID returns the ID of a child that has exited but is not reaped
// until the test ends: a zombie, whose ID no other process can take
// meanwhile.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exit 0")
	require.NoError(t, cmd.Start())
	var info unix.Siginfo
	require.NoError(t, unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil))
	t.Cleanup(func() { _ = cmd.Wait() })
	return cmd.Process.Pid
}
