//go:build !unix && !windows

package updater

import (
	"math"
	"time"
)

// ProcessStart cannot tell when a process started on this platform.
func ProcessStart(int64) (start time.Time, zombie bool) {
	return time.Time{}, false
}

// maxPID bounds the process IDs a marker may name.
const maxPID int64 = math.MaxInt32

// probeLiveness cannot tell whether a process lives on this platform.
func probeLiveness(int64) ProcInfo { return ProcInfo{} }
