//go:build unix

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/runtimeguard/runtimeguard"
)

// reloadSignals receives the service manager's reload signal (SIGHUP,
// systemctl reload of a Type=notify-reload unit), caught from the
// program's start, so that none ends the process, whenever it comes: while
// the server binds, while a reloaded image that could not bind answers
// 409, while it stops. nil without a service manager: SIGHUP is then left
// alone.
var reloadSignals = catchReloads()

func catchReloads() chan os.Signal {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// acknowledgeReloads answers each reload signal, one caught before it too,
// from now until ctx is done: the server loads new code by itself once an
// update proves it, and never on a signal, so a reload asked for is done
// at once. The acknowledgement carries no STATUS=: the status line the
// service manager shows stays the one that names the revision served and,
// when it is stale, why it waits or that only a restart loads the new
// code.
func acknowledgeReloads(ctx context.Context) {
	if reloadSignals == nil {
		return
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-reloadSignals:
				_ = runtimeguard.Notify("RELOADING=1")
				_ = runtimeguard.Notify("READY=1")
			}
		}
	}()
}

// ignoreReloadsAcrossExec ignores the reload signal from now on, for an
// exec: an ignored signal stays ignored in the new image (execve(2)), whose
// Go runtime leaves it so until it is caught again (os/signal), so a
// signal that comes before the new image catches it is lost instead of
// ending the process. catchAgain catches it again, for an exec that
// failed.
func ignoreReloadsAcrossExec() (catchAgain func()) {
	if reloadSignals == nil {
		return func() {}
	}
	signal.Ignore(syscall.SIGHUP)
	return func() { signal.Notify(reloadSignals, syscall.SIGHUP) }
}
