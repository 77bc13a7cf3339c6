package runtimeguard

import (
	"strings"

	"github.com/runtimeguard/runtimeguard/internal/systemd"
)

// A Reloader under a service manager that set NOTIFY_SOCKET (systemd's
// Type=notify or Type=notify-reload) tells it what it does, as
// sd_notify(3) describes: READY=1 when it starts on the bound code,
// RELOADING=1 with MONOTONIC_USEC= when a reload is scheduled, READY=1
// once the new code is bound or the reload is abandoned (the old code
// serves on, stale), and STATUS= lines that say which revision serves and
// why a stale one waits. A handover to a new process image sends
// RELOADING=1; the new image's Reloader sends READY=1.

// initNotifier sets the notifier of the service manager that set
// NOTIFY_SOCKET; nil, which sends nothing, without one.
func (rl *Reloader) initNotifier() {
	n, err := systemd.FromEnv()
	if err != nil {
		rl.logger.Warn("runtimeguard: the service manager is not told of reloads", "error", err)
	}
	rl.notifier = n
}

// notify sends what send says to the service manager, if there is one; a
// failure is logged, and changes nothing else.
func (rl *Reloader) notify(send func(*systemd.Notifier, string) error, status string) {
	if rl.notifier == nil {
		return
	}
	if err := send(rl.notifier, status); err != nil {
		rl.logger.Debug("runtimeguard: the service manager was not told", "status", status, "error", err)
	}
}

// shortRev is a revision as a person reads it in a status line.
func shortRev(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	if rev == "" {
		return "no revision"
	}
	return rev
}

// statusAwaiting is the status line of a stale server in the Reloader's
// state. It asks for the restart once: a why that asks for it already
// loses those words.
func statusAwaiting(from string, state int32, why string) string {
	if state == autoWaiting {
		return "serving " + shortRev(from) + ", stale: the checkout moved; reloading once the update is proven"
	}
	why = strings.TrimPrefix(why, "runtimeguard: ")
	why = strings.TrimSuffix(why, "; restart to load it")
	return "serving " + shortRev(from) + ", stale: the checkout moved and no reload can follow (" + why + "); restart to load the new code"
}
