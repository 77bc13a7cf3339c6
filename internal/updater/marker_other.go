//go:build !unix && !windows

package updater

import "math"

// The platform half of reading markers safely elsewhere: this platform has
// no open that is both non-blocking and no-follow, so a marker is never
// opened, and it cannot tell whether a process lives.

// canOpenSafely says that this platform never opens the updater's files:
// nothing at a path is absent, and anything there proves nothing.
const canOpenSafely = false

// maxPID bounds the process IDs a marker may name.
const maxPID int64 = math.MaxInt32

// probeLiveness cannot tell whether a process lives on this platform.
func probeLiveness(int64) ProcInfo { return ProcInfo{} }
