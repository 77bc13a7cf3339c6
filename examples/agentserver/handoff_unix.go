//go:build unix

package main

import (
	"context"
	"net"

	"github.com/runtimeguard/runtimeguard"
)

// handoff re-executes this program with the listening socket kept open
// across exec (runtimeguard.ExecHandover): connections that arrive
// meanwhile wait in the socket's backlog for the new image, so none is
// refused. The HTTP server stops accepting and closes every connection
// once it answered the request it serves (see quiesce); then the process
// image is replaced, keeping its ID, so a supervisor sees the same
// process. It returns only when that failed, and the server then serves
// again on the same socket.
func handoff(ctx context.Context, a *app, ln net.Listener, plan *runtimeguard.Plan) error {
	catchAgain := func() {}
	h := &runtimeguard.ExecHandover{
		Listeners: []net.Listener{ln},
		Quiesce: func(context.Context) error {
			catchAgain = ignoreReloadsAcrossExec()
			return a.quiesce()
		},
		Resume: func(lns []net.Listener) error {
			catchAgain()
			a.serve(lns[0])
			return nil
		},
	}
	return h.Handover(ctx, plan)
}
