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

// opened watches path (what a link there leads to, or the file itself)
// for opens: the function reports whether anything opened it since.
// inotify queues IN_OPEN as the open happens, so no wait is needed.
func opened(t *testing.T, path string) func() bool {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	_, err = unix.InotifyAddWatch(fd, path, unix.IN_OPEN)
	require.NoError(t, err)
	return func() bool {
		buf := make([]byte, 4096)
		n, err := unix.Read(fd, buf)
		return err == nil && n > 0
	}
}

// A probe of the checkout lock opens nothing but a regular file: a FIFO
// or a directory at the lock's name, or where a link there leads (the
// updater's own path is probed through links, as it opens it), is never
// opened (a FIFO's open would release a writer waiting on it; a device's
// could do anything), and the reason says so; a regular file is opened,
// as the probe must.
func TestProbeCheckoutLockOpensNoSpecialFile(t *testing.T) {
	for _, kind := range []string{"FIFO", "directory"} {
		for _, follow := range []bool{false, true} {
			t.Run(fmt.Sprintf("a %s, through a link %v", kind, follow), func(t *testing.T) {
				dir := tempDir(t)
				special := filepath.Join(dir, "special")
				if kind == "FIFO" {
					gittest.Mkfifo(t, special)
				} else {
					require.NoError(t, os.Mkdir(special, 0o755))
				}
				path := special
				if follow {
					path = filepath.Join(dir, "hermes-update.lock")
					require.NoError(t, os.Symlink(special, path))
				}
				wasOpened := opened(t, special)
				state, why := ProbeCheckoutLock(path, follow)
				assert.Equal(t, LockUnknown, state, why)
				assert.False(t, wasOpened(), "the probe opened the %s: %s", kind, why)
				assert.Contains(t, why, "not opened")
				assert.Contains(t, why, map[string]string{"FIFO": "named pipe", "directory": "directory"}[kind])
			})
		}
	}
	t.Run("a regular file", func(t *testing.T) {
		path := filepath.Join(tempDir(t), "hermes-update.lock")
		writeFile(t, path, "")
		wasOpened := opened(t, path)
		state, why := ProbeCheckoutLock(path, false)
		assert.Equal(t, LockFree, state, why)
		assert.True(t, wasOpened(), "the probe tried the lock without opening its file")
	})
}
