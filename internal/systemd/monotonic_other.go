//go:build !linux

package systemd

import "errors"

// errNoMonotonic is the error of a platform without CLOCK_MONOTONIC's
// reading.
var errNoMonotonic = errors.New("no CLOCK_MONOTONIC on this platform")

// monotonicUsec fails where no systemd runs: a RELOADING=1 without its
// time would be ignored by a Type=notify-reload unit anyway.
func monotonicUsec() (uint64, error) { return 0, errNoMonotonic }
