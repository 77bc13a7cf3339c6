//go:build !unix && !windows

package runtimeguard

import "math"

// maxPID bounds the process IDs a marker may name.
const maxPID = math.MaxInt32

// safeOpenMarker is nil: this platform has no open that is both
// non-blocking and no-follow, so the marker is never opened and a present
// marker is unknown.
var safeOpenMarker func(path string) ([]byte, fileKind)

// probeProcess cannot tell whether a process lives on this platform.
func probeProcess(int) procInfo { return procInfo{} }
