package gittest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// awaitExit waits for the child pid to exit, leaving it unreaped.
func awaitExit(t testing.TB, pid int, _ func(pid int) bool) {
	t.Helper()
	var info unix.Siginfo
	require.NoError(t, unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil))
}
