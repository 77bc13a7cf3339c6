package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/runtimeguard/runtimeguard"
)

// The reload modes.
const (
	reloadOff       = "off"       // answer 409 and wait for the operator, as without reloads
	reloadInProcess = "inprocess" // restart the workers and rebind the guard
	reloadExec      = "exec"      // hand the listening socket to a new process image
)

// reloader decides and carries out reloads.
type reloader struct {
	mode  string
	drain time.Duration // how long in-flight guarded work may take to finish
	// handoff starts the new code in a new process (exec mode). It
	// returns only when that failed; the server then stays on the old
	// code.
	handoff func(*runtimeguard.Reload) error
	logger  *slog.Logger

	mu       sync.Mutex // protects running and tried
	running  bool       // a reload is under way
	tried    time.Time  // when a plan was last asked for
	finished chan struct{}
}

// minPlanInterval spaces the plans asked for by stale requests: a plan is
// a full read of the checkout, and a request storm must not become a read
// storm.
const minPlanInterval = 200 * time.Millisecond

// try asks the guard for a reload plan and, when it gives one, schedules
// it and starts carrying it out; it reports whether a reload is scheduled.
// The caller answers its request with the 409, which then says so.
func (rl *reloader) try(s *Server) bool {
	if rl.mode == "" || rl.mode == reloadOff {
		return false
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.running {
		return true
	}
	if time.Since(rl.tried) < minPlanInterval {
		return false
	}
	rl.tried = time.Now()
	plan, err := s.guard.PlanReload(context.Background())
	if err != nil {
		if !errors.Is(err, runtimeguard.ErrNotReady) {
			rl.log().Warn("reload plan", "error", err)
		} else {
			rl.log().Debug("no reload yet", "why", err)
		}
		return false
	}
	if err := plan.Schedule(); err != nil {
		plan.Release()
		rl.log().Warn("reload plan", "error", err)
		return false
	}
	rl.running = true
	rl.finished = make(chan struct{})
	rl.log().Info("reload scheduled", "from", plan.From, "to", plan.To, "update_id", plan.Receipt.UpdateID, "mode", rl.mode)
	go rl.carryOut(s, plan)
	return true
}

// carryOut stops admitting guarded work, drains what runs, and loads the
// new code. Anything that fails leaves the server on the old code, stale,
// answering the 409 without a scheduled restart.
func (rl *reloader) carryOut(s *Server, plan *runtimeguard.Reload) {
	defer func() {
		plan.Release()
		s.gate.open()
		rl.mu.Lock()
		rl.running = false
		close(rl.finished)
		rl.mu.Unlock()
	}()
	if !s.gate.closeAndDrain(rl.drain) {
		rl.log().Warn("reload abandoned: guarded work still ran at the drain deadline", "deadline", rl.drain)
		return
	}
	switch rl.mode {
	case reloadInProcess:
		// The new code's binding is the last check: only if HEAD still
		// is the plan's revision do the workers load it.
		if err := s.guard.Rebind(context.Background(), plan); err != nil {
			rl.log().Warn("reload abandoned: the new code could not be bound", "error", err)
			return
		}
		s.loadAgent()
		rl.log().Info("reloaded", "revision", plan.To)
	case reloadExec:
		err := rl.handoff(plan)
		rl.log().Warn("reload abandoned: the new process could not be started", "error", err)
	}
}

// wait waits for the reload under way, if any, to finish.
func (rl *reloader) wait() {
	rl.mu.Lock()
	ch := rl.finished
	rl.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (rl *reloader) log() *slog.Logger {
	if rl.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return rl.logger
}

// gate counts guarded work in flight and, while a reload drains, admits
// none.
type gate struct {
	mu     sync.Mutex
	closed bool
	n      int           // guarded work in flight
	idle   chan struct{} // closed once n is 0 while the gate is closed
	opened chan struct{} // closed when the gate opens again
}

func (g *gate) init() {
	g.opened = make(chan struct{})
	close(g.opened)
}

// enter admits one piece of guarded work, unless the gate is closed.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

// leave ends a piece of guarded work.
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.closed && g.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// closeAndDrain closes the gate and waits at most d for the work in
// flight to end; it reports whether it did.
func (g *gate) closeAndDrain(d time.Duration) bool {
	g.mu.Lock()
	g.closed = true
	g.opened = make(chan struct{})
	if g.n == 0 {
		g.mu.Unlock()
		return true
	}
	idle := make(chan struct{})
	g.idle = idle
	g.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

// open admits guarded work again.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.opened)
	}
}

// waitOpen waits until the gate is open.
func (g *gate) waitOpen() {
	g.mu.Lock()
	ch := g.opened
	g.mu.Unlock()
	<-ch
}
