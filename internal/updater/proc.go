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
// the platform cannot tell when the process started.
type ProcInfo struct {
	State Liveness
	Start time.Time
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
