package updater

import (
	"time"

	"golang.org/x/sys/windows"
)

// ProcessStart asks GetProcessTimes when the process started. Windows has
// no zombies: a process that exited is no longer opened for a query.
func ProcessStart(pid int64) (start time.Time, zombie bool) {
	if pid <= 0 || pid > 1<<32-1 {
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
