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
type flight[T any] struct {
	mu       sync.Mutex // protects started, inflight and last
	started  uint64     // calls started so far
	inflight *call[T]   // the call running, if any
	last     *call[T]   // the latest call that returned
}

// call is one piece of work: done is closed once val is set.
type call[T any] struct {
	seq   uint64
	start time.Time
	done  chan struct{}
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
			c = &call[T]{seq: f.started, start: time.Now(), done: make(chan struct{})}
			f.inflight = c
			go f.run(c, run)
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

// run runs one call and hands it to the callers, even when it panics.
func (f *flight[T]) run(c *call[T], run func(c *call[T])) {
	defer func() {
		f.mu.Lock()
		f.last, f.inflight = c, nil
		f.mu.Unlock()
		close(c.done)
	}()
	run(c)
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
