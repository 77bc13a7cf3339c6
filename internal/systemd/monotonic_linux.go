package systemd

import "golang.org/x/sys/unix"

// monotonicUsec reads CLOCK_MONOTONIC, the clock of MONOTONIC_USEC=, in
// microseconds.
func monotonicUsec() (uint64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	return uint64(ts.Sec)*1e6 + uint64(ts.Nsec)/1e3, nil
}
