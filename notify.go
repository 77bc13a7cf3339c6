package runtimeguard

import (
	"fmt"

	"github.com/runtimeguard/runtimeguard/internal/systemd"
)

// Notify tells the service manager that set NOTIFY_SOCKET (systemd's
// Type=notify or Type=notify-reload units) the assignments, such as
// "READY=1", "STOPPING=1" or "STATUS=serving abc123", in one datagram, as
// sd_notify(3) does; without NOTIFY_SOCKET it does nothing. "RELOADING=1"
// gets MONOTONIC_USEC=, the time now on CLOCK_MONOTONIC, unless it is
// given. A name that begins with "@" is in Linux's abstract namespace.
//
// A [Reloader] tells the service manager of its reloads by itself; Notify
// is for what a host does besides: its readiness when it reloads nothing,
// its stop, its answer to a reload signal.
func Notify(assignments ...string) error {
	n, err := systemd.FromEnv()
	if err == nil {
		err = n.Send(assignments...)
	}
	if err != nil {
		return fmt.Errorf("runtimeguard: %w", err)
	}
	return nil
}
