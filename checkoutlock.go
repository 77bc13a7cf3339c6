package runtimeguard

import "github.com/runtimeguard/runtimeguard/internal/updater"

// The states of the updater's checkout lock in an [Observation].
const (
	lockFree    = "free"    // no process holds it, or it has no file
	lockHeld    = "held"    // a process holds it: an update runs
	lockUnknown = "unknown" // this platform cannot tell
)

// checkoutLocks are the checkout locks of the install roots: none for a
// layout without one.
func (c *config) checkoutLocks(roots []string) []string {
	if c.checkoutLock == "" {
		return nil
	}
	return updater.CheckoutLockPaths(roots, c.checkoutLock)
}

// probeCheckoutLocks probes the checkout locks at paths, now, and sets
// what they say in o: the first held (else unknown, else the first) lock,
// its state and why; a held lock makes the update active, one that
// cannot be probed unknown where nothing else says it is active. A lock
// is probed on each look, as a process's liveness is: whether a process
// holds it changes with no change of any file.
func probeCheckoutLocks(o *Observation, paths []string) {
	for _, p := range paths {
		state, why := updater.ProbeCheckoutLock(p)
		word := map[updater.LockState]string{updater.LockFree: lockFree, updater.LockHeld: lockHeld, updater.LockUnknown: lockUnknown}[state]
		if o.CheckoutLockPath == "" || word == lockHeld || word == lockUnknown && o.CheckoutLock == lockFree {
			o.CheckoutLockPath, o.CheckoutLock, o.CheckoutLockReason = p, word, why
		}
		if word == lockHeld {
			break
		}
	}
	switch o.CheckoutLock {
	case lockHeld:
		o.State = UpdateActive
	case lockUnknown:
		if o.State != UpdateActive {
			o.State = UpdateUnknown
		}
	}
}
