//go:build !unix && !windows

package main

import (
	"context"
	"errors"
	"net"

	"github.com/runtimeguard/runtimeguard"
)

// handoff cannot keep the listening socket across a new process here, nor
// hand over to a supervisor: the server stays on the old code, answering
// the 409.
func handoff(_ context.Context, _ *app, _ net.Listener, _ *runtimeguard.Plan) error {
	return errors.New("an exec reload is not supported on this platform")
}
