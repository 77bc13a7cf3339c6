// Package systemd speaks the two protocols a service manager offers a
// server, with nothing but the standard library and golang.org/x/sys: the
// notification socket of sd_notify(3) ($NOTIFY_SOCKET: READY=1,
// RELOADING=1 with MONOTONIC_USEC=, STOPPING=1, STATUS=), which a
// Type=notify-reload unit of systemd.service(5) follows, and the sockets
// of socket activation, sd_listen_fds(3) ($LISTEN_PID, $LISTEN_FDS,
// $LISTEN_FDNAMES).
package systemd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/quote"
)

// Timeout bounds each send to the service manager, its connection
// included. A datagram to a socket whose queue is full (a manager that is
// stuck, or gone and its socket left behind) waits for room, and the
// connection to a socket whose path is on a file system that stopped
// answering waits for the path's lookup; past Timeout the message is lost
// and Send says so, rather than wait for good.
const Timeout = time.Second

// sender sends every notification of the process, one at a time and in
// order, on one goroutine (see bounded.Executor): a socket path that never
// answers holds that goroutine, whatever the number of messages, and a
// message that waits behind it past Timeout is lost.
var sender bounded.Executor

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
// manager that recreates its socket gets the next one. RELOADING=1 without
// MONOTONIC_USEC= gets the time now on CLOCK_MONOTONIC, which a
// Type=notify-reload unit needs to tell the reload it asked for from one
// that began before. A STATUS= line, which systemctl status shows a
// person, is quoted as quote.Text quotes it where it holds a control
// character (a newline, a terminal's escape sequence); any other
// assignment with a newline or a NUL byte is an error. Send waits at most
// Timeout for the manager to take the message, on the process's one
// sender: past it, an error matching os.ErrDeadlineExceeded.
func (n *Notifier) Send(assignments ...string) error {
	if n == nil || len(assignments) == 0 {
		return nil
	}
	assignments = append([]string(nil), assignments...)
	reloading, timed := false, false
	for i, a := range assignments {
		if v, ok := strings.CutPrefix(a, "STATUS="); ok {
			assignments[i] = "STATUS=" + quote.Text(v)
			continue
		}
		if !strings.Contains(a, "=") || strings.ContainsAny(a, "\n\x00") {
			return fmt.Errorf("notify: %q is no single-line assignment", a)
		}
		reloading = reloading || a == "RELOADING=1"
		timed = timed || strings.HasPrefix(a, "MONOTONIC_USEC=")
	}
	if reloading && !timed {
		usec, err := monotonicUsec()
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		timedAssignments := make([]string, 0, len(assignments)+1)
		for _, a := range assignments {
			timedAssignments = append(timedAssignments, a)
			if a == "RELOADING=1" {
				timedAssignments = append(timedAssignments, "MONOTONIC_USEC="+strconv.FormatUint(usec, 10))
			}
		}
		assignments = timedAssignments
	}
	msg := []byte(strings.Join(assignments, "\n") + "\n")
	deadline := time.Now().Add(Timeout)
	t, stuck := bounded.Submit(context.Background(), &sender, nil, Timeout, func(t *bounded.Task[error]) {
		t.Val = n.write(msg, deadline, &t.At)
	}, nil)
	switch {
	case stuck != nil:
		why := stuck.At
		switch {
		case stuck.Full != "":
			why = stuck.Full
		case stuck.Before:
			why = "a message before it has waited " + stuck.Since.Round(time.Millisecond).String() + ": " + stuck.At
		}
		return fmt.Errorf("notify: %s took no message within %v (%s): %w", n.addr.Name, Timeout, why, os.ErrDeadlineExceeded)
	case t.Err != nil:
		return fmt.Errorf("notify: %w", t.Err)
	}
	return t.Val
}

// What a send is on, for a caller that gave up on it.
var (
	connecting = "its path does not answer"
	writing    = "its queue is full"
)

// write sends msg in one datagram, unless deadline, past which its caller
// gave up, has passed; at names what it is on.
func (n *Notifier) write(msg []byte, deadline time.Time, at *atomic.Pointer[string]) error {
	if time.Now().After(deadline) {
		return fmt.Errorf("notify: %s took no message within %v (messages before it held the sender): %w", n.addr.Name, Timeout, os.ErrDeadlineExceeded)
	}
	at.Store(&connecting)
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	defer conn.Close()
	at.Store(&writing)
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if _, err := conn.Write(msg); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("notify: %s took no message within %v (%s): %w", n.addr.Name, Timeout, writing, err)
		}
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
// CLOCK_MONOTONIC (MONOTONIC_USEC=); Ready must follow once the reload is
// done or abandoned.
func (n *Notifier) Reloading(status string) error {
	return n.Send(withStatus(status, "RELOADING=1")...)
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

// Status is the STATUS= assignment of a status line, which Send quotes.
func Status(s string) string { return "STATUS=" + s }
