package runtimeguard

import "sync/atomic"

// Stats counts what a guard did since [New], for an operator's metrics:
// each count only grows, and a snapshot costs a few atomic loads. Publish
// it with the standard library's expvar (see the package examples) or any
// metrics library, and compare two snapshots for rates.
type Stats struct {
	// Checks counts the calls of [Guard.EnsureCurrent], whoever made them
	// ([Guard.Middleware], [Guard.Watch], the host), including those of an
	// unbound guard.
	Checks uint64 `json:"checks"`
	// Stale counts the checks that answered with a *[StaleError]: the
	// 409s the guard caused.
	Stale uint64 `json:"stale"`
	// FullReads counts the full reads of the checkout (HEAD, the refs, the
	// config, the index), made where no proof that nothing changed held,
	// and on every check with [Options].Check "read".
	FullReads uint64 `json:"full_reads"`
	// ReadTimeouts counts the checks that gave up waiting for the file
	// system ([ErrReadTimeout]).
	ReadTimeouts uint64 `json:"read_timeouts"`
	// Reloads counts the reloads carried out by the Reloaders of the
	// guard, and ReloadsAbandoned the planned attempts that were not:
	// work that did not drain by the deadline (each attempt), a restart or
	// a handover that failed or panicked, a checkout that moved again.
	Reloads          uint64 `json:"reloads"`
	ReloadsAbandoned uint64 `json:"reloads_abandoned"`
}

// counters are a guard's counts, each on a cache line of its own so that
// the checks' counting stays cheap from many cores.
type counters struct {
	checks       paddedCount
	stale        atomic.Uint64
	fullReads    atomic.Uint64
	readTimeouts atomic.Uint64
	reloads      atomic.Uint64
	abandoned    atomic.Uint64
}

// paddedCount is a counter alone on its cache line.
type paddedCount struct {
	atomic.Uint64
	_ [56]byte
}

// Stats returns the guard's counts so far.
func (g *Guard) Stats() Stats {
	c := &g.counts
	return Stats{
		Checks:           c.checks.Load(),
		Stale:            c.stale.Load(),
		FullReads:        c.fullReads.Load(),
		ReadTimeouts:     c.readTimeouts.Load(),
		Reloads:          c.reloads.Load(),
		ReloadsAbandoned: c.abandoned.Load(),
	}
}
