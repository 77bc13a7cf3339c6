//go:build windows

package runtimeguard

import (
	"errors"
	"math"
	"time"

	"golang.org/x/sys/windows"
)

// maxPID is the largest process ID OpenProcess takes (a DWORD).
const maxPID int64 = math.MaxUint32

// probeLiveness opens the process for a query; it never signals it. An
// invalid ID means no such process, a denied open means it exists, and an
// open process is alive until its handle is signalled. (The exit code is
// not consulted: a process may exit with 259, STILL_ACTIVE.)
func probeLiveness(pid int64) procInfo {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		switch {
		case errors.Is(err, windows.ERROR_INVALID_PARAMETER):
			return procInfo{State: processGone}
		case errors.Is(err, windows.ERROR_ACCESS_DENIED):
			return procInfo{State: processAlive}
		}
		return procInfo{}
	}
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 0)
	if err != nil {
		return procInfo{}
	}
	switch ev {
	case uint32(windows.WAIT_TIMEOUT):
	case windows.WAIT_OBJECT_0:
		return procInfo{State: processGone}
	default:
		return procInfo{}
	}
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return procInfo{State: processAlive}
	}
	return procInfo{State: processAlive, Start: time.Unix(0, created.Nanoseconds())}
}
