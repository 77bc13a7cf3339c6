package updater

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// procStatBootTime reads the btime line of /proc/stat: the boot time in
// whole seconds.
func procStatBootTime(t *testing.T) time.Time {
	t.Helper()
	data, err := os.ReadFile("/proc/stat")
	require.NoError(t, err)
	for _, line := range bytes.Split(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			sec, err := strconv.ParseInt(string(bytes.TrimSpace(rest)), 10, 64)
			require.NoError(t, err, "/proc/stat: %q", line)
			return time.Unix(sec, 0)
		}
	}
	t.Fatal("/proc/stat has no btime line")
	return time.Time{}
}

// The boot time from the clocks is /proc/stat's btime before its
// truncation to seconds.
func TestBootTimeMatchesProcStat(t *testing.T) {
	btime := procStatBootTime(t)
	boot, ok := bootTime()
	require.True(t, ok, "bootTime()")
	d := boot.Sub(btime)
	assert.True(t, d > -time.Millisecond && d < time.Second+time.Millisecond,
		"bootTime() = %v, /proc/stat btime %v: %v apart, want [0, 1s)", boot, btime, d)
}

// A child's start time is known to a clock tick (10 ms), not to the second:
// it lies between a tick before the moment Start was called and the moment
// it returned.
func TestProcessStartOfChildIsPrecise(t *testing.T) {
	before := time.Now()
	cmd := exec.Command("sleep", "30")
	require.NoError(t, cmd.Start())
	after := time.Now()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	start, zombie := ProcessStart(int64(cmd.Process.Pid))
	require.False(t, zombie)
	require.False(t, start.IsZero(), "ProcessStart(%d)", cmd.Process.Pid)
	const tick = time.Second / clockTicks
	assert.False(t, start.Before(before.Add(-2*tick)),
		"ProcessStart(%d) = %v, %v before Start was called; want at most %v", cmd.Process.Pid, start, before.Sub(start), 2*tick)
	assert.False(t, start.After(after), "ProcessStart(%d) = %v, after Start returned at %v", cmd.Process.Pid, start, after)
}
