package runtimeguard

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// flight runs work on the file system on a goroutine of its own, one piece
// at a time, so that no caller waits longer than its timeout for a file
// system that hangs, and a hung one holds up one goroutine, whatever the
// number of callers.
//
// A caller is answered by a call that began after it arrived: the one in
// flight if it began later, else a new one (after the older call returns).
// So an answer is never older than the question.
//
// The goroutine is a worker that lives while calls keep coming and ends
// after a quiet interval (between workerIdle and twice that): a check of
// an unchanged checkout hands its stats to a goroutine that is parked and
// whose stack has grown already, rather than starting one.
type flight[T any] struct {
	mu       sync.Mutex    // protects started, inflight, last and worker
	started  uint64        // calls started so far
	inflight *call[T]      // the call running, if any
	last     *call[T]      // the latest call that returned
	worker   bool          // a worker lives and takes calls from work
	work     chan *call[T] // the next call, to the worker (room for one)

	// idle is how long the worker waits for calls before it checks
	// whether any came; workerIdle when zero.
	idle time.Duration
}

// workerIdle is how long a flight's worker waits for calls before it
// checks whether any came, and ends if none did.
const workerIdle = time.Second

// call is one piece of work: done is closed once val is set.
type call[T any] struct {
	seq   uint64
	start time.Time
	done  chan struct{}
	fn    func(c *call[T]) // the work
	// at names what the call is waiting on now (a path, or what it does),
	// for the error of a caller that gave up on it; nil when nothing is
	// known.
	at  atomic.Pointer[string]
	val T
}

// stuckCall is the call a caller gave up on: what it was on, and for how
// long the caller waited or it had run.
type stuckCall struct {
	at    string
	since time.Duration
	// before is true when the call was already past the timeout when the
	// caller arrived.
	before bool
}

// do returns a call that began after the caller arrived and has returned,
// starting one with run (on its own goroutine) when needed. run must set
// c.val; a panic in it is the caller's to recover. When no such call
// returns within timeout, or the call in flight has run longer than
// timeout already, do gives up and says what the call is blocked on.
func (f *flight[T]) do(timeout time.Duration, run func(c *call[T])) (*call[T], *stuckCall) {
	var timer *time.Timer
	f.mu.Lock()
	arrival := f.started
	for {
		if f.last != nil && f.last.seq > arrival {
			c := f.last
			f.mu.Unlock()
			return c, nil
		}
		c := f.inflight
		if c == nil {
			f.started++
			c = &call[T]{seq: f.started, start: time.Now(), done: make(chan struct{}), fn: run}
			f.inflight = c
			f.hand(c)
		} else if since := time.Since(c.start); since > timeout {
			f.mu.Unlock()
			return nil, &stuckCall{at: c.where(), since: since, before: true}
		}
		f.mu.Unlock()
		if c.wait() {
			f.mu.Lock()
			continue
		}
		if timer == nil {
			timer = time.NewTimer(timeout)
			defer timer.Stop()
		}
		select {
		case <-c.done:
		case <-timer.C:
			return nil, &stuckCall{at: c.where(), since: timeout}
		}
		f.mu.Lock()
	}
}

// await waits for the call in flight, if any, to return, and reports
// whether one returned within timeout. It starts none.
func (f *flight[T]) await(timeout time.Duration) bool {
	f.mu.Lock()
	c := f.inflight
	f.mu.Unlock()
	if c == nil {
		return true
	}
	if c.wait() {
		return true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// hand gives c, the call just made the one in flight, to the worker,
// starting one if none lives. f.mu is held.
//
// The worker takes each call before the next is made (a call is made only
// when none is in flight, and the one in flight was taken), so work has
// room for c, and the send cannot block.
func (f *flight[T]) hand(c *call[T]) {
	if f.worker {
		f.work <- c
		return
	}
	if f.work == nil {
		f.work = make(chan *call[T], 1)
	}
	f.worker = true
	go f.serve(c)
}

// serve is the worker: it runs c, then each call handed to it, until no
// call came in a whole interval of f.idle.
func (f *flight[T]) serve(c *call[T]) {
	wait := f.idle
	if wait <= 0 {
		wait = workerIdle
	}
	idle := time.NewTimer(wait)
	defer idle.Stop()
	seen := c.seq
	for {
		f.run(c)
		c = nil
		for c == nil {
			select {
			case c = <-f.work:
			case <-idle.C:
				f.mu.Lock()
				select {
				case c = <-f.work:
					// Handed before the interval ran out, and counted in
					// seen already: it is this worker's, whatever the
					// count says.
				default:
					if f.started == seen {
						f.worker = false // under f.mu: no call is handed to this worker again
						f.mu.Unlock()
						return
					}
				}
				seen = f.started
				f.mu.Unlock()
				idle.Reset(wait)
			}
		}
	}
}

// run runs one call and hands it to the callers, even when it panics.
func (f *flight[T]) run(c *call[T]) {
	defer func() {
		f.mu.Lock()
		f.last, f.inflight = c, nil
		f.mu.Unlock()
		close(c.done)
	}()
	c.fn(c)
	c.fn = nil
}

// yields is how many times a caller lets the call run before it sleeps:
// a call just started is the next goroutine of the caller's processor, so
// yielding runs it on the caller's thread, and a check of an unchanged
// checkout waits for its stats without waking another thread.
const yields = 4

// wait lets the call run and reports whether it returned meanwhile.
func (c *call[T]) wait() bool {
	for i := 0; i < yields; i++ {
		select {
		case <-c.done:
			return true
		default:
			runtime.Gosched()
		}
	}
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// where is what the call is on now, or "".
func (c *call[T]) where() string {
	if p := c.at.Load(); p != nil {
		return *p
	}
	return ""
}
