package runtimeguard

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/updater"
)

func TestZombieProcessIsGone(t *testing.T) {
	cmd := exec.Command("git", "--version")
	require.NoError(t, cmd.Start())
	// Wait for the exit without reaping: the child stays a zombie.
	var info unix.Siginfo
	require.NoError(t, unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil))
	_, zombie := updater.ProcessStart(int64(cmd.Process.Pid))
	assert.True(t, zombie, "updater.ProcessStart(%d) of an unreaped child", cmd.Process.Pid)
	assert.Equal(t, processGone, probeProcess(int64(cmd.Process.Pid)).State)
	require.NoError(t, cmd.Wait())
}

func TestProcessStartOfSelf(t *testing.T) {
	start, zombie := updater.ProcessStart(int64(os.Getpid()))
	require.False(t, zombie)
	require.False(t, start.IsZero())
	assert.True(t, start.Before(time.Now().Add(time.Second)), "start %v is in the future", start)
	assert.True(t, start.After(time.Now().Add(-24*time.Hour)), "start %v: this test process is not a day old", start)
}
