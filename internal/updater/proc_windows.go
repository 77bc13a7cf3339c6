package updater

import (
	"errors"
	"math"
	"time"

	"golang.org/x/sys/windows"
)

// processStart asks GetProcessTimes when the process started. Windows has
// no zombies: a process that exited is no longer opened for a query.
func processStart(pid int64) (start time.Time, zombie bool) {
	if pid <= 0 || pid > maxPID {
		return time.Time{}, false
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return time.Time{}, false
	}
	defer windows.CloseHandle(h)
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, created.Nanoseconds()), false
}

// maxPID is the largest process ID OpenProcess takes (a DWORD).
const maxPID int64 = math.MaxUint32

// probeLiveness opens the process for a query; it never signals it. An
// invalid ID means no such process, a denied open means it exists, and an
// open process is alive until its handle is signalled. (The exit code is
// not consulted: a process may exit with 259, STILL_ACTIVE.)
func probeLiveness(pid int64) ProcInfo {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		switch {
		case errors.Is(err, windows.ERROR_INVALID_PARAMETER):
			return ProcInfo{State: ProcessGone}
		case errors.Is(err, windows.ERROR_ACCESS_DENIED):
			return ProcInfo{State: ProcessAlive}
		}
		return ProcInfo{}
	}
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 0)
	if err != nil {
		return ProcInfo{}
	}
	switch ev {
	case uint32(windows.WAIT_TIMEOUT):
	case windows.WAIT_OBJECT_0:
		return ProcInfo{State: ProcessGone}
	default:
		return ProcInfo{}
	}
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return ProcInfo{State: ProcessAlive}
	}
	return aliveSince(time.Unix(0, created.Nanoseconds()))
}
