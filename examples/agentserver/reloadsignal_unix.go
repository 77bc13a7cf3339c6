//go:build unix

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/runtimeguard/runtimeguard"
)

// acknowledgeReloads answers the service manager's reload signal
// (SIGHUP, systemctl reload of a Type=notify-reload unit) from now until
// ctx is done: the server loads new code by itself once an update proves
// it, and never on a signal, so a reload asked for is done at once. The
// acknowledgement carries no STATUS=: the status line the service manager
// shows stays the one that names the revision served and, when it is
// stale, why it waits or that only a restart loads the new code.
// Without a service manager, SIGHUP is left alone.
func acknowledgeReloads(ctx context.Context) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = runtimeguard.Notify("RELOADING=1")
				_ = runtimeguard.Notify("READY=1")
			}
		}
	}()
}
