package runtimeguard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/systemd"
)

// ReloaderOptions configures a [Reloader]. Exactly one of Restart and
// Handover must be set; the zero value of every other field is its
// documented default.
type ReloaderOptions struct {
	// Restart loads the new code in this process, Handover in a new one
	// ([ExecHandover]); an error or a panic of either keeps the guard stale.
	Restart  func(ctx context.Context, plan *Plan) error
	Handover func(ctx context.Context, plan *Plan) error
	// DrainTimeout bounds the wait for guarded work to end before a
	// reload. Zero: [DefaultDrainTimeout].
	DrainTimeout time.Duration
	// ProofInterval is how often the updater's files are read while a
	// proof is awaited. Zero: [DefaultProofInterval].
	ProofInterval time.Duration
	// Logger receives the reloads. Nil: the guard's [Options.Logger].
	Logger *slog.Logger
}

// Defaults of [ReloaderOptions].
const (
	DefaultDrainTimeout  = 30 * time.Second
	DefaultProofInterval = 250 * time.Millisecond
)

// Reloader reloads a host's code once the updater's files prove it safe: it
// drains the guarded work and has the host load the new code. It is safe
// for concurrent use, and runs until the context given to [NewReloader] is
// done. A nil or zero Reloader passes requests through and is done.
type Reloader struct {
	g        *Guard
	restart  func(context.Context, *Plan) error
	handover func(context.Context, *Plan) error
	drain    time.Duration
	interval time.Duration
	logger   *slog.Logger
	notifier *systemd.Notifier // the service manager's, if any
	notes    chan note         // to the service manager, in order: see tell
	told     chan struct{}     // closed once tell ended
	notesMu  sync.Mutex        // protects notesLost
	// notesLost are the kinds of failure of notifications logged: each
	// once, not once per message.
	notesLost map[string]bool

	gate gate
	wake chan struct{} // a stale request asks for an early look
	done chan struct{} // closed when the run ends

	plans atomic.Uint64 // plans tried
}

// NewReloader starts a Reloader for g. Under a service manager that set
// NOTIFY_SOCKET, it says READY=1 at once: start it once the host listens.
func NewReloader(ctx context.Context, g *Guard, opts ReloaderOptions) (*Reloader, error) {
	switch {
	case ctx == nil:
		return nil, errNilContext("NewReloader")
	case g == nil:
		return nil, errors.New("runtimeguard: NewReloader: no guard")
	case opts.Restart == nil && opts.Handover == nil:
		return nil, optionError("ReloaderOptions.Restart", nil, "is nil, and so is Handover: exactly one of them must be set")
	case opts.Restart != nil && opts.Handover != nil:
		return nil, optionError("ReloaderOptions.Restart", nil, "is set, and so is Handover: exactly one of them must be set")
	case opts.DrainTimeout < 0:
		return nil, optionError("ReloaderOptions.DrainTimeout", opts.DrainTimeout, "is negative")
	case opts.ProofInterval < 0:
		return nil, optionError("ReloaderOptions.ProofInterval", opts.ProofInterval, "is negative")
	}
	if !g.reloader.CompareAndSwap(false, true) {
		return nil, errors.New("runtimeguard: NewReloader: the guard has a Reloader already")
	}
	g.auto.Store(autoWaiting)
	rl := &Reloader{
		g:        g,
		restart:  opts.Restart,
		handover: opts.Handover,
		drain:    cmp.Or(opts.DrainTimeout, DefaultDrainTimeout),
		interval: cmp.Or(opts.ProofInterval, DefaultProofInterval),
		logger:   cmp.Or(opts.Logger, g.config().logger),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		notes:    make(chan note, maxNotes),
		told:     make(chan struct{}),
	}
	if rl.logger == nil {
		rl.logger = slog.Default()
	}
	rl.initNotifier()
	rl.gate.init()
	go rl.run(ctx)
	return rl, nil
}

// Done returns a channel that is closed once the Reloader has stopped: its
// context is done, no reload is under way, and its last message to the
// service manager went out or was given up on (within a second).
func (rl *Reloader) Done() <-chan struct{} {
	if rl == nil || rl.done == nil {
		return closedChan
	}
	return rl.done
}

// closedChan is a channel closed from the start.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Wrap is [Guard.Middleware] for a host with a Reloader: a reload also
// drains the requests it runs, and one that comes as a reload ends waits.
func (rl *Reloader) Wrap(next http.Handler) http.Handler {
	if next == nil {
		next = http.DefaultServeMux
	}
	if rl == nil || rl.g == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for !rl.gate.enter() {
			if err := rl.g.EnsureCurrent(); err != nil {
				rl.refuse(w, r, err)
				return
			}
			select { // current, gate closed: a reload is just finishing
			case <-rl.gate.opened():
			case <-r.Context().Done():
				return
			}
		}
		defer rl.gate.leave()
		if err := rl.g.EnsureCurrent(); err != nil {
			rl.refuse(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers a stale request and flushes the answer.
func (rl *Reloader) refuse(w http.ResponseWriter, r *http.Request, err error) {
	select {
	case rl.wake <- struct{}{}:
	default:
	}
	rl.g.answerStale(w, r, err)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// The states of a guard's Reloader, which choose the stale message.
const (
	autoWaiting int32 = iota // a move will be reloaded once proven
	autoRefused              // the move seen can be reloaded by no proof
)

// run learns of each move of the checkout and carries out its reload, until
// ctx is done.
func (rl *Reloader) run(ctx context.Context) {
	defer close(rl.done)
	defer rl.g.reloader.Store(false)
	go rl.tell(ctx)
	defer func() { close(rl.notes); <-rl.told }()
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Add(1)
	go func() {
		defer watching.Done()
		_ = rl.g.Watch(watchCtx, rl.interval)
	}()
	defer watching.Wait()
	defer stopWatch()
	rl.notify((*systemd.Notifier).Ready, "serving "+shortRev(rl.g.Identity().Revision))
	for {
		select {
		case <-ctx.Done():
			return
		case <-rl.g.Changed():
		}
		plan := rl.awaitProof(ctx)
		if plan == nil {
			return // ctx is done
		}
		rl.carryOut(ctx, plan)
	}
}

// awaitProof plans until a plan is made, and returns it; nil once ctx is
// done. While the view may still turn into a proof (the update runs), the
// guard's stale answers say that the server reloads by itself; once it
// cannot (a failed update), they give the guard's message again.
func (rl *Reloader) awaitProof(ctx context.Context) *Plan {
	last, told := "", int32(-1)
	from := rl.g.Identity().Revision
	t := time.NewTimer(0)
	defer t.Stop()
	var earliest time.Time // of a look a request asks for
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-rl.wake:
			// A stale request asks for an early look: one per quarter
			// of the interval at most, so that a storm of requests is no
			// storm of plans (each reads the checkout and the updater's
			// files).
			if wait := time.Until(earliest); wait > 0 {
				if !t.Stop() {
					select {
					case <-t.C:
					default:
					}
				}
				t.Reset(wait)
				continue
			}
		}
		earliest = time.Now().Add(rl.interval / 4)
		rl.plans.Add(1)
		plan, err := rl.g.PlanReload(ctx)
		if err == nil {
			return plan
		}
		state := autoRefused
		if isPending(err) || !errors.Is(err, ErrNotReady) {
			state = autoWaiting
		}
		if prev := rl.g.auto.Swap(state); state == autoRefused && prev != autoRefused {
			// Said once per move that nothing will prove: stale answers
			// give the guard's message (restart manually) from now on.
			rl.logger.Warn("runtimeguard: no reload will prove this move; restart to load the new code", "why", err.Error())
		}
		if state != told {
			told = state
			rl.notify((*systemd.Notifier).SetStatus, statusAwaiting(from, state, err.Error()))
		}
		if why := err.Error(); why != last {
			last = why
			rl.logger.Debug("runtimeguard: no reload yet", "why", why)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(rl.interval)
	}
}

// carryOut schedules plan, drains guarded work and hands over; anything
// that fails leaves the server on the old code, stale.
func (rl *Reloader) carryOut(ctx context.Context, plan *Plan) {
	defer plan.Release()
	defer rl.gate.open()
	log := rl.logger.With("from", plan.From, "to", plan.To, "receipt", plan.Receipt.ID)
	if err := plan.Schedule(); err != nil {
		rl.abandon(plan, log, "the plan could not be scheduled", err)
		return
	}
	rl.notify((*systemd.Notifier).Reloading, "reloading "+shortRev(plan.From)+" to "+shortRev(plan.To))
	if !rl.gate.closeAndDrain(ctx, rl.drain) {
		// Nothing was loaded: the receipt still proves the reload, which
		// is tried again from a new plan once work in flight may be done.
		plan.releaseUnused()
		rl.g.counts.abandoned.Add(1)
		log.Warn("runtimeguard: reload postponed: guarded work still ran at the drain deadline", "drain_timeout", rl.drain)
		rl.notify((*systemd.Notifier).Ready, "serving "+shortRev(plan.From)+", stale: reload postponed: guarded work still ran at the drain deadline")
		return
	}
	if rl.handover != nil {
		rl.flush()
		err := rl.callHost(log, "handover", rl.handover, ctx, plan)
		rl.abandon(plan, log, "the handover failed", err)
		rl.notify((*systemd.Notifier).Ready, "serving "+shortRev(plan.From)+", stale: reload abandoned: the handover failed")
		return
	}
	if err := rl.callHost(log, "restart", rl.restart, ctx, plan); err != nil {
		rl.abandon(plan, log, "the restart failed", err)
		rl.notify((*systemd.Notifier).Ready, "serving "+shortRev(plan.From)+", stale: reload abandoned: the restart failed")
		return
	}
	if err := plan.bind(ctx, log); err != nil {
		rl.abandon(plan, log, "the new code could not be bound", err)
		rl.notify((*systemd.Notifier).Ready, "serving "+shortRev(plan.From)+", stale: reload abandoned: the new code could not be bound")
		return
	}
	rl.g.auto.Store(autoWaiting)
	rl.g.counts.reloads.Add(1)
	rl.notify((*systemd.Notifier).Ready, "serving "+shortRev(plan.To)+", reloaded from "+shortRev(plan.From))
}

// callHost calls the host's restart or handover, and turns a panic of it
// into an error, logged with its stack: the reload is then abandoned as
// one that failed, and the process goes on, stale.
func (rl *Reloader) callHost(log *slog.Logger, name string, f func(context.Context, *Plan) error, ctx context.Context, plan *Plan) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the host's %s panicked: %v", name, v)
			log.Error("runtimeguard: the host's "+name+" panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	return f(ctx, plan)
}

// abandon abandons plan: it is released first, and counted last, so
// that a host that sees the count sees the guard's answers without it.
func (rl *Reloader) abandon(plan *Plan, log *slog.Logger, why string, err error) {
	plan.Release()
	rl.g.auto.Store(autoRefused)
	if err != nil {
		log.Warn("runtimeguard: reload abandoned: "+why, "error", err)
	} else {
		log.Warn("runtimeguard: reload abandoned: " + why)
	}
	rl.g.counts.abandoned.Add(1)
}

// gate counts guarded work in flight and, while a reload drains, admits
// none.
type gate struct {
	mu     sync.Mutex    // protects the fields below
	closed bool          // no guarded work is admitted
	n      int           // guarded work in flight
	idle   chan struct{} // closed once n is 0 while the gate is closed
	openc  chan struct{} // closed while the gate is open
}

func (g *gate) init() {
	g.openc = make(chan struct{})
	close(g.openc)
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

// opened returns a channel closed while the gate is open.
func (g *gate) opened() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.openc
}

// closeAndDrain closes the gate and waits at most d for the work in
// flight to end; it reports whether it did.
func (g *gate) closeAndDrain(ctx context.Context, d time.Duration) bool {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		g.openc = make(chan struct{})
	}
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
	case <-ctx.Done():
	}
	return false
}

// open admits guarded work again.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		g.idle = nil
		close(g.openc)
	}
}

// A Reloader under a service manager that set NOTIFY_SOCKET tells it of
// its reloads, as docs/deploy.md lists: READY=1, RELOADING=1 and STATUS=
// lines, queued in order and sent by a goroutine of their own (tell), so
// that a reload never waits for the manager.

// initNotifier sets the notifier of the service manager that set
// NOTIFY_SOCKET; nil, which sends nothing, without one.
func (rl *Reloader) initNotifier() {
	n, err := systemd.FromEnv()
	if err != nil {
		rl.logger.Warn("runtimeguard: the service manager is not told of reloads", "error", err)
	}
	rl.notifier = n
}

// note is a message to the service manager: what send says, with the
// status line; or, where flushed is set, a mark closed once the messages
// before it were sent or given up on.
type note struct {
	send    func(*systemd.Notifier, string) error
	status  string
	flushed chan struct{}
}

// maxNotes bounds the messages queued for the service manager: past it
// (a manager that took none for as many sends, each waiting at most
// systemd.Timeout), a message is lost.
const maxNotes = 16

// notify queues what send says for the service manager, if there is one,
// without waiting: the reload never waits for the manager. A message the
// queue has no room for is lost, and logged as lost notifications are.
func (rl *Reloader) notify(send func(*systemd.Notifier, string) error, status string) {
	if rl.notifier == nil {
		return
	}
	select {
	case rl.notes <- note{send: send, status: status}:
	default:
		rl.lost("queue", status, fmt.Errorf("%d messages before it wait for the service manager to take them", maxNotes))
	}
}

// tell sends the queued messages to the service manager, in order, each
// within systemd.Timeout, until the queue is closed. Once ctx is done, a
// message the manager does not take loses the ones after it too, so that
// a Reloader that stops waits for one send at most.
func (rl *Reloader) tell(ctx context.Context) {
	defer close(rl.told)
	failed := false
	for n := range rl.notes {
		if n.flushed != nil {
			close(n.flushed)
			continue
		}
		if failed && ctx.Err() != nil {
			continue
		}
		err := n.send(rl.notifier, n.status)
		failed = err != nil
		if err != nil {
			// The kind of a failure is its innermost error: a timeout,
			// a socket that is gone, a permission refused.
			kind := err
			for u := errors.Unwrap(kind); u != nil; u = errors.Unwrap(kind) {
				kind = u
			}
			rl.lost(kind.Error(), n.status, err)
		}
	}
}

// flush waits, at most systemd.Timeout, for the messages queued for the
// service manager to be sent or given up on: before a handover, which
// replaces or ends the process, so that the manager hears RELOADING=1
// from the old code where it takes messages at all.
func (rl *Reloader) flush() {
	if rl.notifier == nil {
		return
	}
	mark := note{flushed: make(chan struct{})}
	select {
	case rl.notes <- mark:
	default:
		return // full: the manager takes nothing
	}
	t := time.NewTimer(systemd.Timeout)
	defer t.Stop()
	select {
	case <-mark.flushed:
	case <-t.C:
	}
}

// lost logs a message the service manager was not told, once per kind
// of failure: a manager that takes nothing is said once, not once per
// message.
func (rl *Reloader) lost(kind, status string, err error) {
	rl.notesMu.Lock()
	said := rl.notesLost[kind]
	if rl.notesLost == nil {
		rl.notesLost = make(map[string]bool)
	}
	rl.notesLost[kind] = true
	rl.notesMu.Unlock()
	if !said {
		rl.logger.Warn("runtimeguard: the service manager was not told; the reload goes on (later failures of this kind are not logged)", "status", status, "error", err)
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

// Notify sends the assignments (such as "READY=1") to the service manager
// that set NOTIFY_SOCKET, waiting at most a second; else it does nothing.
func Notify(assignments ...string) error {
	n, err := systemd.FromEnv()
	if err == nil {
		err = n.Send(assignments...)
	}
	if err != nil {
		return fmt.Errorf("runtimeguard: %w", err)
	}
	return nil
}
