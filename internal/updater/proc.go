package updater

import "time"

// The probe of a process. Its platform files define the same unexported
// names and export nothing: maxPID and probeLiveness in proc_unix.go
// (signal 0), proc_windows.go (OpenProcess) and proc_other.go (none);
// processStart in proc_linux.go (/proc), proc_darwin.go (sysctl),
// proc_windows.go (GetProcessTimes) and proc_nostart.go (not known);
// recordedStart and the pidfd the cache holds (procHandle) in proc_linux.go
// and proc_nolinux.go.

// Liveness is what a process probe learned.
type Liveness int

// The answers of a process probe.
const (
	LivenessUnknown Liveness = iota
	ProcessAlive
	ProcessGone
)

// ProcInfo is the answer of a process probe. Start is the zero time when
// the platform cannot tell when the process started, and so is Created.
type ProcInfo struct {
	State Liveness
	// Start is when the process started, as precisely as the platform
	// tells it; Created is the same instant on the clock the updater's
	// writers record a creation time on (recordedStart).
	Start, Created time.Time
}

// aliveSince is the answer for a live process that started at start (the
// zero time where the platform cannot tell).
func aliveSince(start time.Time) ProcInfo {
	return ProcInfo{State: ProcessAlive, Start: start, Created: recordedStart(start)}
}

// ProbeProcess reports whether pid is alive and, where the platform can
// tell, when it started. A process ID out of the platform's range is
// unknown, never truncated into another.
func ProbeProcess(pid int64) ProcInfo {
	if pid <= 0 || pid > maxPID {
		return ProcInfo{}
	}
	return probeLiveness(pid)
}

// createdOnRecord is when process pid was created on the clock the updater's
// writers record a creation time on (recordedStart), where this platform
// tells it.
func createdOnRecord(pid int64) (time.Time, bool) {
	start, _ := processStart(pid)
	if start.IsZero() {
		return time.Time{}, false
	}
	return recordedStart(start), true
}
