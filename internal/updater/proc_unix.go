//go:build unix

package updater

import (
	"errors"
	"math"

	"golang.org/x/sys/unix"
)

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
