//go:build !linux

package systemd

// monotonicUsec fails where no systemd runs: a RELOADING=1 without its
// time would be ignored by a Type=notify-reload unit anyway.
func monotonicUsec() (uint64, error) { return 0, errNoMonotonic }
