package updater

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

func TestZombieProcessIsGone(t *testing.T) {
	cmd := exec.Command("git", "--version")
	require.NoError(t, cmd.Start())
	// Wait for the exit without reaping: the child stays a zombie.
	var info unix.Siginfo
	require.NoError(t, unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil))
	_, zombie := processStart(int64(cmd.Process.Pid))
	assert.True(t, zombie, "processStart(%d) of an unreaped child", cmd.Process.Pid)
	assert.Equal(t, ProcessGone, ProbeProcess(int64(cmd.Process.Pid)).State)
	require.NoError(t, cmd.Wait())
}

func TestProcessStartOfSelf(t *testing.T) {
	start, zombie := processStart(int64(os.Getpid()))
	require.False(t, zombie)
	require.False(t, start.IsZero())
	assert.True(t, start.Before(time.Now().Add(time.Second)), "start %v is in the future", start)
	assert.True(t, start.After(time.Now().Add(-24*time.Hour)), "start %v: this test process is not a day old", start)
}

// recordedCreation is the creation time of process pid as the updater's
// writers record it on Linux (psutil, its own /proc probe, marker.sh):
// /proc/stat's btime, in whole seconds, plus the start ticks of
// /proc/PID/stat.
func recordedCreation(t *testing.T, pid int) float64 {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	ticks, err := strconv.ParseFloat(fields[19], 64)
	require.NoError(t, err)
	procStat, err := os.ReadFile("/proc/stat")
	require.NoError(t, err)
	for _, line := range strings.Split(string(procStat), "\n") {
		if rest, ok := strings.CutPrefix(line, "btime "); ok {
			btime, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			require.NoError(t, err)
			return btime + ticks/100
		}
	}
	t.Fatal("/proc/stat has no btime")
	return 0
}

// A creation time is compared on the clock the updater records it on, so
// that the 2 s tolerance is the updater's on either side: the boot time
// truncated to whole seconds, not the guard's own precise one.
func TestCreationTimeOnTheUpdatersClock(t *testing.T) {
	live := gittest.LongChild(t).Process.Pid
	ct := recordedCreation(t, live)
	assert.Equal(t, fmt.Sprintf("%.3f", ct), CreationTime(live), "the creation time a marker written here records")
	now := time.Now().Unix()
	for _, tc := range []struct {
		offset float64
		want   Life
	}{{-1.995, Live}, {1.995, Live}, {-2.05, Ended}, {2.05, Ended}} {
		path := filepath.Join(tempDir(t), markerName)
		writeFile(t, path, fmt.Sprintf("%d\n%d\nct:%.3f\n", live, now, ct+tc.offset))
		m := System.ClassifyMarker(path, defaultMaxAge)
		assert.Equal(t, tc.want, m.Life, "recorded %+.3f s from the updater's reading: %s", tc.offset, m.Reason)
	}
}

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

	start, zombie := processStart(int64(cmd.Process.Pid))
	require.False(t, zombie)
	require.False(t, start.IsZero(), "processStart(%d)", cmd.Process.Pid)
	const tick = time.Second / clockTicks
	assert.False(t, start.Before(before.Add(-2*tick)),
		"processStart(%d) = %v, %v before Start was called; want at most %v", cmd.Process.Pid, start, before.Sub(start), 2*tick)
	assert.False(t, start.After(after), "processStart(%d) = %v, after Start returned at %v", cmd.Process.Pid, start, after)
}
