//go:build windows

package main

import (
	"context"
	"errors"
	"net"
	"os"

	"github.com/runtimeguard/runtimeguard"
)

// exitReload is the status the server exits with for its supervisor to
// start the new code, where it cannot re-execute itself: 75
// (EX_TEMPFAIL), the status a systemd unit lists in
// RestartForceExitStatus=.
const exitReload = 75

// handoff cannot keep the listening socket across a new process here.
// Under a supervisor (--supervised), the server finishes what it serves and
// exits with exitReload for the supervisor to start the new code, which
// binds to whatever HEAD is then: a move in between is what its guard
// catches. Without one, exiting would leave the server dead: it stays on
// the old code, answering the 409.
func handoff(_ context.Context, a *app, _ net.Listener, _ *runtimeguard.Plan) error {
	if !a.supervised {
		return errors.New("an exec reload needs a supervisor here (--supervised)")
	}
	_ = a.quiesce()
	os.Exit(exitReload)
	return nil
}
