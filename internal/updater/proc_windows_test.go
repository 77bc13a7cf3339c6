package updater

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/windows"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

func TestWindowsProbeProcess(t *testing.T) {
	self := ProbeProcess(int64(os.Getpid()))
	assert.Equal(t, ProcessAlive, self.State)
	assert.False(t, self.Start.IsZero(), "GetProcessTimes gave no start time")
	assert.True(t, self.Start.Before(time.Now().Add(time.Second)))

	child := gittest.Self(nil, gittest.WaitChildEnv+"=1")
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	pid := child.Process.Pid
	assert.Equal(t, ProcessAlive, ProbeProcess(int64(pid)).State, "a running child")
	require.NoError(t, stdin.Close())
	require.NoError(t, child.Wait())
	assert.Equal(t, ProcessGone, ProbeProcess(int64(pid)).State, "an exited child")

	assert.Equal(t, LivenessUnknown, ProbeProcess(maxPID+1).State)
	assert.Equal(t, LivenessUnknown, ProbeProcess(0).State)
}

// A process that exited with 259 (STILL_ACTIVE) is gone: liveness comes from
// waiting on the process, not from its exit code.
func TestWindowsExitCode259IsGone(t *testing.T) {
	child := gittest.Self(nil, gittest.ExitChildEnv+"=259")
	require.NoError(t, child.Start())
	defer func() { _ = child.Wait() }()
	// A handle of our own keeps the exited process's object, and its id,
	// alive while it is probed.
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(child.Process.Pid))
	require.NoError(t, err)
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 30000)
	require.NoError(t, err)
	require.Equal(t, uint32(windows.WAIT_OBJECT_0), ev, "the child did not exit")
	var code uint32
	require.NoError(t, windows.GetExitCodeProcess(h, &code))
	require.Equal(t, uint32(259), code)
	assert.Equal(t, ProcessGone, ProbeProcess(int64(child.Process.Pid)).State)
}
