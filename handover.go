package runtimeguard

import (
	"context"
	"errors"
	"net"
	"os"
)

// ExecHandover hands a reload over to a new image of this program, by exec:
// its Handover method is a [ReloaderOptions.Handover]. The listening
// sockets stay open across the exec, so that a connection that arrives
// meanwhile waits instead of being refused, and the process keeps its ID.
// The new image takes the sockets and the plan with [Inherit].
//
// It needs Unix: elsewhere Handover fails, and a host hands over by exiting
// with status 75 for its supervisor to start it again (docs/deploy.md in
// the repository).
type ExecHandover struct {
	// Listeners are the listening sockets to keep: TCP or Unix listeners.
	Listeners []net.Listener
	// Quiesce stops the host's serving: it closes the host's listeners (the
	// handover keeps copies of the sockets) and waits, within ctx, for each
	// connection to end after its response. An error abandons the handover.
	Quiesce func(ctx context.Context) error
	// Resume serves again, on listeners of the same sockets, when the
	// handover failed after Quiesce.
	Resume func(listeners []net.Listener) error
}

// check refuses a Handover whose arguments describe none.
func (h *ExecHandover) check(ctx context.Context, plan *Plan) error {
	switch {
	case ctx == nil:
		return errNilContext("exec handover")
	case plan == nil:
		return errors.New("runtimeguard: exec handover: no plan")
	case h.Quiesce == nil || h.Resume == nil:
		return errors.New("runtimeguard: exec handover: Quiesce and Resume must be set")
	}
	return nil
}

// Inherited is what the [ExecHandover] that started this image passed it,
// or the descriptors a service manager passed it (see [Inherit]).
type Inherited struct {
	// Listeners are the listening sockets, in the order of
	// [ExecHandover.Listeners] or of LISTEN_FDS.
	Listeners []net.Listener
	// PacketConns are a service manager's datagram sockets (UDP, Unix
	// datagram), in the order of LISTEN_FDS.
	PacketConns []net.PacketConn
	// Files are the other descriptors a service manager passed (FIFOs,
	// files, connected sockets), named by LISTEN_FDNAMES.
	Files []*os.File
	// ExpectRevision and ExpectReceipt are the plan's revision and receipt
	// ID, for [Options.ExpectRevision] and [Options.ExpectReceipt]; empty
	// for a service manager's sockets.
	ExpectRevision, ExpectReceipt string

	lock *os.File // the plan's lock, held across the exec
}

// Release releases the plan's lock that the old image held across the exec:
// call it once [New] returned, whether it bound or not. It may be called on
// a nil Inherited, and more than once.
func (in *Inherited) Release() {
	if in != nil && in.lock != nil {
		in.lock.Close()
		in.lock = nil
	}
}
