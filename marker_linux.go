package runtimeguard

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/updater"
)

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
	if again, zombie := updater.ProcessStart(pid); zombie || again.Sub(start).Abs() > time.Millisecond {
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
