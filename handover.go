package runtimeguard

import (
	"context"
	"errors"
	"net"
	"os"
)

// ExecHandover hands a reload over to a new image of this program: it is
// a [ReloaderOptions.Handover] (its Handover method) for a server that
// re-executes itself. The listening sockets stay open across exec, so a
// connection that arrives meanwhile waits in a socket's backlog for the
// new image rather than being refused; the process keeps its ID, so a
// supervisor (systemd, launchd) goes on tracking it. The new image takes
// the sockets, and the plan's revision and receipt, with [Inherit].
//
// On a platform where no socket can be kept across exec (Windows, and
// others outside Unix) Handover fails, and the Reloader abandons the
// reload: the server goes on, stale. A host there hands over by exiting
// with status 75 (EX_TEMPFAIL) for its supervisor to start it again
// (systemd's RestartForceExitStatus=75).
type ExecHandover struct {
	// Listeners are the listening sockets to keep: TCP or Unix listeners
	// (each with a File method). A Unix socket's path is kept too.
	Listeners []net.Listener
	// Quiesce stops the host's serving: it closes the host's listeners
	// (the sockets stay open through copies the handover holds) and
	// waits, within ctx, for each connection to end after the response
	// to the request it serves. The new image then accepts what waits.
	// An error abandons the handover before the exec.
	Quiesce func(ctx context.Context) error
	// Resume serves again, on listeners of the same sockets, when the
	// handover failed after Quiesce: the server goes on, on the old
	// code, stale.
	Resume func(listeners []net.Listener) error
}

// check refuses a Handover whose arguments describe none.
func (h *ExecHandover) check(ctx context.Context, plan *Plan) error {
	switch {
	case h == nil:
		return errors.New("runtimeguard: exec handover: nil *ExecHandover")
	case ctx == nil:
		return errNilContext("exec handover")
	case plan == nil:
		return errors.New("runtimeguard: exec handover: no plan")
	case h.Quiesce == nil || h.Resume == nil:
		return errors.New("runtimeguard: exec handover: Quiesce and Resume must be set")
	}
	return nil
}

// Inherited is what an [ExecHandover] passed the image it started, or
// the descriptors a service manager passed it: see [Inherit].
type Inherited struct {
	// Listeners are the sockets kept, in the order of
	// [ExecHandover.Listeners]; or a service manager's listening sockets
	// (stream or sequential packets), in the order of LISTEN_FDS.
	Listeners []net.Listener
	// PacketConns are a service manager's datagram sockets (UDP, such as
	// HTTP/3's; Unix datagram sockets, such as a syslog socket), in the
	// order of LISTEN_FDS. An [ExecHandover] keeps none: they are closed
	// at its exec.
	PacketConns []net.PacketConn
	// Files are the other descriptors a service manager passed, handed
	// back to the host as they are, in the order of LISTEN_FDS: a FIFO, a
	// regular file, a device, a connected socket (Accept=yes), a socket of
	// a family the net package does not serve (netlink). An
	// [ExecHandover] keeps none.
	Files []*os.File
	// ExpectRevision and ExpectReceipt are the plan's revision and the ID
	// of the receipt that proved it: set them as [Options.ExpectRevision]
	// and [Options.ExpectReceipt], so that New binds only to the planned
	// code, and only if no update began since the plan; else it fails and
	// the host answers the 409 until it is restarted, never serving the
	// code on disk. Both are empty for a service manager's sockets.
	ExpectRevision, ExpectReceipt string

	lock  *os.File       // the plan's lock, held across the exec
	names map[any]string // the LISTEN_FDNAMES name of each descriptor passed
}

// Name returns the name a service manager gave the descriptor x, one of
// the Listeners, PacketConns or Files it passed: its LISTEN_FDNAMES entry
// (the socket unit's FileDescriptorName=, by default the unit's name), or
// "unknown" where the variable named none. It is "" for anything else,
// such as the Listeners of an [ExecHandover], which are known by their
// order.
func (in *Inherited) Name(x any) string {
	if in == nil {
		return ""
	}
	return in.names[x]
}

// Release releases the plan's lock the old image held across the exec:
// call it once [New] returned, whether it bound or not. It is safe on a
// nil Inherited and more than once.
func (in *Inherited) Release() {
	if in != nil && in.lock != nil {
		in.lock.Close()
		in.lock = nil
	}
}
