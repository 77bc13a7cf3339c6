package updater

import (
	"time"

	"golang.org/x/sys/unix"
)

// szomb is the p_stat value of a zombie process (sys/proc.h).
const szomb = 5

// processStart asks the kernel for the process's kinfo_proc: when it
// started, or that it is a zombie.
func processStart(pid int64) (start time.Time, zombie bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", int(pid))
	if err != nil || int64(kp.Proc.P_pid) != pid {
		return time.Time{}, false
	}
	if kp.Proc.P_stat == szomb {
		return time.Time{}, true
	}
	tv := kp.Proc.P_starttime
	return time.Unix(int64(tv.Sec), int64(tv.Usec)*1000), false
}
