package updater

import "time"

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
	// writers record a creation time on (RecordedStart).
	Start, Created time.Time
}

// aliveSince is the answer for a live process that started at start (the
// zero time where the platform cannot tell).
func aliveSince(start time.Time) ProcInfo {
	return ProcInfo{State: ProcessAlive, Start: start, Created: RecordedStart(start)}
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
