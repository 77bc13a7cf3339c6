//go:build !unix && !windows

package updater

import "math"

// maxPID bounds the process IDs a marker may name.
const maxPID int64 = math.MaxInt32

// probeProcess cannot tell whether a process lives on this platform.
func probeProcess(int64) ProcInfo { return ProcInfo{} }
