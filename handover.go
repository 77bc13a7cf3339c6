package runtimeguard

import (
	"context"
	"errors"
	"net"
	"os"
)

// ExecHandover reloads by exec of this program, keeping its listening
// sockets open so that no connection is refused; it needs Unix. Its
// Handover method is a [ReloaderOptions.Handover], and the new image calls
// [Inherit].
type ExecHandover struct {
	// Listeners are the listening sockets to keep (TCP or Unix).
	Listeners []net.Listener
	// Quiesce closes the host's listeners and waits, within ctx, for
	// the responses in flight; an error abandons the handover.
	Quiesce func(ctx context.Context) error
	// Resume serves again on the same sockets after a failed handover.
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

// Inherited is what the [ExecHandover] that started this image passed it,
// or what a service manager passed it (see [Inherit]).
type Inherited struct {
	// Listeners are the listening sockets; PacketConns, the datagram ones.
	Listeners   []net.Listener
	PacketConns []net.PacketConn
	// Files are the other descriptors a service manager passed.
	Files []*os.File
	// ExpectRevision and ExpectReceipt are the plan's, for the [Options].
	ExpectRevision, ExpectReceipt string

	lock  *os.File       // the plan's lock, held across the exec
	names map[any]string // the LISTEN_FDNAMES name of each descriptor passed
}

// Name returns the LISTEN_FDNAMES name a service manager gave x, one of
// the descriptors it passed; "" for anything else.
func (in *Inherited) Name(x any) string {
	if in == nil {
		return ""
	}
	return in.names[x]
}

// Release releases the plan's lock held across the exec: call it once [New]
// returned. It is safe on a nil Inherited.
func (in *Inherited) Release() {
	if in != nil && in.lock != nil {
		in.lock.Close()
		in.lock = nil
	}
}
