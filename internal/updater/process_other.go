//go:build !unix && !windows

package updater

import "math"

// maxPID bounds the process IDs a marker may name.
const maxPID int64 = math.MaxInt32

// ProbeProcess cannot tell whether a process lives on this platform.
func ProbeProcess(int64) ProcInfo { return ProcInfo{} }
