package runtimeguard

import (
	"time"

	"golang.org/x/sys/unix"
)

// szomb is the p_stat value of a zombie process (sys/proc.h).
const szomb = 5

// processStart asks the kernel for the process's kinfo_proc.
func processStart(pid int) (start time.Time, zombie bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		return time.Time{}, false
	}
	if kp.Proc.P_stat == szomb {
		return time.Time{}, true
	}
	tv := kp.Proc.P_starttime
	return time.Unix(int64(tv.Sec), int64(tv.Usec)*1000), false
}
