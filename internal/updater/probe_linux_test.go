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
	_, zombie := ProcessStart(int64(cmd.Process.Pid))
	assert.True(t, zombie, "ProcessStart(%d) of an unreaped child", cmd.Process.Pid)
	assert.Equal(t, ProcessGone, ProbeProcess(int64(cmd.Process.Pid)).State)
	require.NoError(t, cmd.Wait())
}

func TestProcessStartOfSelf(t *testing.T) {
	start, zombie := ProcessStart(int64(os.Getpid()))
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
