package updater

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on every
// architecture Go supports on Linux.
const clockTicks = 100

// processStart reads field 22 of /proc/PID/stat, the start time in clock
// ticks since boot, and adds it to the boot time. A process in state Z is a
// zombie: it has exited and only waits to be reaped.
func processStart(pid int64) (start time.Time, zombie bool) {
	stat, err := os.ReadFile("/proc/" + strconv.FormatInt(pid, 10) + "/stat")
	if err != nil {
		return time.Time{}, false
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return time.Time{}, false
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 20 {
		return time.Time{}, false
	}
	if string(fields[0]) == "Z" || string(fields[0]) == "X" {
		return time.Time{}, true
	}
	ticks, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	boot, ok := bootTime()
	if !ok {
		return time.Time{}, false
	}
	sec := ticks / clockTicks
	nsec := (ticks % clockTicks) * (uint64(time.Second) / clockTicks)
	return boot.Add(time.Duration(sec)*time.Second + time.Duration(nsec)), false
}

// bootTime is the realtime clock less CLOCK_BOOTTIME, the clock of
// /proc/PID/stat start times (it counts time suspended): the boot time to the
// nanosecond, where /proc/stat's btime is the same value truncated to whole
// seconds. It is read for each process, not kept, since setting the realtime
// clock moves it.
func bootTime() (time.Time, bool) {
	var wall, sinceBoot unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME, &wall) != nil ||
		unix.ClockGettime(unix.CLOCK_BOOTTIME, &sinceBoot) != nil {
		return time.Time{}, false
	}
	return time.Unix(wall.Unix()).Add(-time.Duration(sinceBoot.Nano())), true
}

// recordedStart moves a start time read by processStart onto the clock the
// updater's writers record a creation time on (psutil, its own /proc
// probe, marker.sh): /proc/stat's btime, the boot time truncated to whole
// seconds, plus the ticks since boot. The two differ by the boot time's
// fraction of a second, which would leave the updater's 2 s tolerance
// lopsided.
func recordedStart(start time.Time) time.Time {
	boot, ok := bootTime()
	if !ok || start.IsZero() {
		return start
	}
	return start.Add(-boot.Sub(boot.Truncate(time.Second)))
}

// procHandle is a pidfd: it refers to one process, never to a later one
// that reuses its ID, and polls readable once that process exited.
type procHandle struct {
	pid   int64
	fd    int
	start time.Time
}

// openProc opens a pidfd for pid, whose start time a probe just read as
// start; nil where pidfds are not available. The start time is read again
// through the pidfd's process, so that a pid reused between the probe and
// the open is not mistaken for the probed process.
func openProc(pid int64, start time.Time) *procHandle {
	fd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		return nil
	}
	// Two readings of one start time differ by the jitter of the boot
	// time (realtime less boottime); another process's differ by at least
	// a tick of 10 ms, or it started in the same tick and cannot be told.
	if again, zombie := processStart(pid); zombie || again.Sub(start).Abs() > time.Millisecond {
		unix.Close(fd)
		return nil
	}
	h := &procHandle{pid: pid, fd: fd, start: start}
	if !h.alive() {
		h.close()
		return nil
	}
	return h
}

// alive reports whether the process still runs: its pidfd is not readable.
func (h *procHandle) alive() bool {
	fds := [1]unix.PollFd{{Fd: int32(h.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds[:], 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n == 0
	}
}

func (h *procHandle) close() { unix.Close(h.fd) }
