//go:build !unix && !windows

package updater

import "math"

// maxPID bounds the process IDs a marker may name.
const maxPID int64 = math.MaxInt32

// probeLiveness cannot tell whether a process lives on this platform.
func probeLiveness(int64) ProcInfo { return ProcInfo{} }
