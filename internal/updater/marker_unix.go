//go:build unix

package updater

import (
	"errors"
	"math"

	"golang.org/x/sys/unix"
)

// The platform half of reading markers safely on Unix: a file is opened
// with O_NOFOLLOW|O_NONBLOCK (package fsread), and a process is asked
// after with signal 0. When a process started is read in
// marker_linux.go and marker_darwin.go; other Unix systems cannot tell
// (marker_nostart.go).

// canOpenSafely says that this platform opens a file without following a
// final link and without blocking on a FIFO or device.
const canOpenSafely = true

// maxPID is the largest process ID kill(2) can be asked about: pid_t is a
// 32-bit signed integer, and unix.Kill would silently truncate a larger one.
const maxPID int64 = math.MaxInt32

// probeLiveness asks with signal 0 whether pid exists: EPERM means it exists
// but belongs to someone else. Where the platform says when the process
// started, or that it is a zombie, the answer says so too.
func probeLiveness(pid int64) ProcInfo {
	err := unix.Kill(int(pid), 0)
	switch {
	case err == nil || errors.Is(err, unix.EPERM):
	case errors.Is(err, unix.ESRCH):
		return ProcInfo{State: ProcessGone}
	default:
		return ProcInfo{}
	}
	start, zombie := processStart(pid)
	if zombie {
		return ProcInfo{State: ProcessGone}
	}
	return aliveSince(start)
}
