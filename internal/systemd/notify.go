// Package systemd speaks the two protocols a service manager offers a
// server, with nothing but the standard library and golang.org/x/sys: the
// notification socket of sd_notify(3) ($NOTIFY_SOCKET: READY=1,
// RELOADING=1 with MONOTONIC_USEC=, STOPPING=1, STATUS=), which a
// Type=notify-reload unit of systemd.service(5) follows, and the sockets
// of socket activation, sd_listen_fds(3) ($LISTEN_PID, $LISTEN_FDS,
// $LISTEN_FDNAMES).
package systemd

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// ExitRestart is the exit status of a server that hands over to its new
// code by exiting, for its service manager to start it again: 75
// (EX_TEMPFAIL of sysexits.h). A systemd unit lists it in
// RestartForceExitStatus= so that it restarts the service whatever its
// Restart= says, and in SuccessExitStatus= so that it is not logged as a
// failure.
const ExitRestart = 75

// Notifier sends state changes to the service manager's notification
// socket. A nil Notifier sends nothing: every method is a no-op on it.
type Notifier struct {
	addr *net.UnixAddr
}

// FromEnv returns the Notifier of $NOTIFY_SOCKET: nil, with no error,
// when the variable is unset or empty (no service manager listens). A
// name that begins with "@" is in Linux's abstract namespace (the Go net
// package maps "@" to the leading NUL byte). Any other name that is not an
// absolute path (systemd's "vsock:" addresses) is an error. The variable
// is left set: the notifier sends many messages over the process's life,
// and a process that replaces its image by exec keeps telling the same
// manager.
func FromEnv() (*Notifier, error) {
	name := os.Getenv("NOTIFY_SOCKET")
	switch {
	case name == "":
		return nil, nil
	case name[0] != '/' && name[0] != '@':
		return nil, fmt.Errorf("NOTIFY_SOCKET=%q: neither an absolute path nor an abstract socket name", name)
	case len(name) < 2:
		return nil, fmt.Errorf("NOTIFY_SOCKET=%q: no socket name", name)
	}
	return &Notifier{addr: &net.UnixAddr{Name: name, Net: "unixgram"}}, nil
}

// Send sends the assignments (each "NAME=value", without a newline) in one
// datagram, as sd_notify(3) does: a new socket for each message, so that a
// manager that recreates its socket gets the next one.
func (n *Notifier) Send(assignments ...string) error {
	if n == nil || len(assignments) == 0 {
		return nil
	}
	for _, a := range assignments {
		if !strings.Contains(a, "=") || strings.ContainsAny(a, "\n\x00") {
			return fmt.Errorf("notify: %q is no single-line assignment", a)
		}
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(assignments, "\n") + "\n")); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// Ready says the service serves: after its start, and after a reload; a
// non-empty status goes with it as STATUS=, as with the methods below.
func (n *Notifier) Ready(status string) error {
	return n.Send(withStatus(status, "READY=1")...)
}

// Reloading says a reload begins, with the time it began on
// CLOCK_MONOTONIC (MONOTONIC_USEC=), which a Type=notify-reload unit
// needs to tell the reload it asked for from one that began before;
// Ready must follow once the reload is done or abandoned.
func (n *Notifier) Reloading(status string) error {
	if n == nil {
		return nil
	}
	usec, err := monotonicUsec()
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return n.Send(withStatus(status, "RELOADING=1", "MONOTONIC_USEC="+strconv.FormatUint(usec, 10))...)
}

// Stopping says the service begins to stop.
func (n *Notifier) Stopping(status string) error {
	return n.Send(withStatus(status, "STOPPING=1")...)
}

// SetStatus sends a status line alone, which systemctl status shows.
func (n *Notifier) SetStatus(status string) error {
	return n.Send(Status(status))
}

// withStatus appends the status line, if there is one, to assignments.
func withStatus(status string, assignments ...string) []string {
	if status == "" {
		return assignments
	}
	return append(assignments, Status(status))
}

// Status is the STATUS= assignment of a status line: what no single line
// holds (a newline, a NUL byte) is replaced by a space.
func Status(s string) string {
	return "STATUS=" + strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == 0 {
			return ' '
		}
		return r
	}, s)
}
