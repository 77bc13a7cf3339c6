package runtimeguard

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/cpu"
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
// an unchanged checkout hands its stats to a goroutine that is parked, or
// still looking for work (see poll), rather than starting one.
type flight[T any] struct {
	mu      sync.Mutex    // protects started, worker, reaper and seen, and the making of calls
	started uint64        // calls started so far
	worker  bool          // a worker lives and takes calls from work
	work    chan *call[T] // the next call, to the worker (room for one); nil ends the worker
	reaper  *time.Timer   // ends the worker after a quiet interval: see reap
	seen    uint64        // started, at the reaper's latest look
	// looking is the mark in slot of a worker that looks for calls: a call
	// no caller makes, set with work.
	looking *call[T]

	// idle is how long the worker waits for calls before it checks
	// whether any came; workerIdle when zero.
	idle time.Duration
	// workers counts the goroutines that serve the flight: one while a
	// worker lives, more for a moment where one was ended as it looked
	// (see poll).
	workers atomic.Int32

	_ cpu.CacheLinePad
	// slot is how a call is handed to a worker that looks for its next
	// call without parking (see poll): looking while the worker looks, a
	// call while one was handed to it and not yet taken, nil otherwise
	// (a call then goes through work). Whoever changes it from looking
	// decides where the call goes: the caller that puts one in, or the
	// worker that stops looking. It has a cache line of its own, which the
	// looking worker reads and its caller writes once.
	slot atomic.Pointer[call[T]]

	_ cpu.CacheLinePad
	// What the worker writes as a call returns, on a line of its own,
	// apart from what callers write as they make one.
	inflight atomic.Pointer[call[T]] // the call running, if any (made under mu)
	last     atomic.Pointer[call[T]] // the latest call that returned
	// ran is how long the latest call ran, in nanoseconds.
	ran atomic.Int64
	// probe is true when the parked worker would look for its next call
	// (see poll): calls came often, and no look failed lately. Its caller
	// then looks for the call's return for a while before it yields (see
	// probeSpin).
	probe atomic.Bool
	_     cpu.CacheLinePad
}

// workerIdle is how long a flight's worker waits for calls before it
// checks whether any came, and ends if none did.
const workerIdle = time.Second

// call is one piece of work: done is closed once val is set.
type call[T any] struct {
	seq   uint64
	start int64 // when it was made, on the monotonic clock (see mono)
	done  chan struct{}
	fn    func(c *call[T]) // the work
	// at names what the call is waiting on now (a path, or what it does),
	// for the error of a caller that gave up on it; nil when nothing is
	// known.
	at  atomic.Pointer[string]
	val T
}

// epoch is where mono counts from.
var epoch = time.Now()

// mono is the time since epoch on the monotonic clock, in nanoseconds:
// one read of the clock, where time.Now reads two.
func mono() int64 { return int64(time.Since(epoch)) }

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
	// arrived is when the caller arrived, on the mono clock: the start of
	// the call it made, or the clock read to age the one it found in
	// flight. Its timeout counts from there.
	var arrived int64
	f.mu.Lock()
	arrival := f.started
	for first := true; ; first = false {
		if c := f.last.Load(); c != nil && c.seq > arrival {
			f.mu.Unlock()
			return c, nil
		}
		c, spin := f.inflight.Load(), time.Duration(0)
		if c == nil {
			f.started++
			c = &call[T]{seq: f.started, start: mono(), done: make(chan struct{}), fn: run}
			f.inflight.Store(c)
			switch {
			case f.hand(c):
				spin = f.spinFor()
			case f.probe.Load():
				spin = probeSpin
			}
			if first {
				arrived = c.start
			}
		} else {
			now := mono()
			if since := time.Duration(now - c.start); since > timeout {
				f.mu.Unlock()
				return nil, &stuckCall{at: c.where(), since: since, before: true}
			}
			if first {
				arrived = now
			}
		}
		f.mu.Unlock()
		if c.wait(min(spin, timeout)) {
			if c.seq > arrival {
				return c, nil // began after the caller arrived, and returned
			}
			f.mu.Lock()
			continue
		}
		if timer == nil {
			waited := time.Duration(mono() - arrived)
			if waited >= timeout {
				return nil, &stuckCall{at: c.where(), since: waited}
			}
			timer = time.NewTimer(timeout - waited)
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
	c := f.inflight.Load()
	if c == nil {
		return true
	}
	if c.wait(0) {
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
// starting one if none lives, and reports whether the worker was looking
// for it (see poll). f.mu is held.
//
// The worker takes each call before the next is made (a call is made only
// when none is in flight, and the one in flight was taken), so work holds
// at most the nil of a worker ended as it looked (see reap and poll); the
// send then waits until that worker, or the one beside it, takes the nil,
// within a look's spinMax.
func (f *flight[T]) hand(c *call[T]) (looking bool) {
	if f.worker {
		if f.slot.CompareAndSwap(f.looking, c) {
			return true
		}
		f.work <- c
		return false
	}
	if f.work == nil {
		f.work = make(chan *call[T], 1)
		f.looking = new(call[T])
	}
	f.worker = true
	f.seen = f.started
	if f.reaper == nil {
		f.reaper = time.AfterFunc(f.idleInterval(), f.reap)
	} else {
		f.reaper.Reset(f.idleInterval())
	}
	f.workers.Add(1)
	go f.serve(c)
	return false
}

// idleInterval is f.idle, or workerIdle.
func (f *flight[T]) idleInterval() time.Duration {
	if f.idle > 0 {
		return f.idle
	}
	return workerIdle
}

// reap, run by f.reaper, ends the worker when no call was made since its
// latest look and none is in flight, else looks again an interval later.
// With none in flight the worker has taken every call handed to it, so
// work has room for the nil that ends it.
//
// Ending a worker by a timer of its own, rather than in the worker's wait
// for calls, leaves that wait a receive from a channel and nothing else:
// no timer is added to the runtime's heap, and taken out, at every call.
func (f *flight[T]) reap() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.worker {
		return
	}
	if f.started == f.seen && f.inflight.Load() == nil {
		f.worker = false // under f.mu: no call is handed to this worker again
		f.work <- nil
		return
	}
	f.seen = f.started
	f.reaper.Reset(f.idleInterval())
}

// serve is the worker: it runs c, then each call handed to it, until it
// is handed nil (see reap).
//
// A call whose work ends the goroutine (runtime.Goexit) still answers its
// callers (see run); the worker it ended is replaced by one that takes
// the next call from work, so that the calls handed to the worker, and
// the nil that ends it, are still taken.
func (f *flight[T]) serve(c *call[T]) {
	ended := false
	defer func() {
		if ended {
			f.workers.Add(-1)
		} else {
			go f.replace() // which counts as this worker
		}
	}()
	l := looker{procs: runtime.GOMAXPROCS(0), backoff: int64(minBackoff)}
	for n := 1; c != nil; n++ {
		end := f.run(c)
		if n%1024 == 0 {
			l.procs = runtime.GOMAXPROCS(0)
		}
		var ok bool
		if c, ok = f.poll(end, &l); !ok {
			f.probe.Store(l.procs >= 2 && l.gap < int64(spinMax) && mono() >= l.until)
			c = <-f.work
			l.gap = mono() - end
		}
	}
	// A worker that ended looks for no call: its probe would make the
	// caller that starts the next one look for its answer in vain.
	f.probe.Store(false)
	ended = true
}

// replace is the worker that replaces one whose call ended its goroutine:
// it serves from the next call (or nil) handed to the flight.
func (f *flight[T]) replace() { f.serve(<-f.work) }

// looker is what a worker knows of its looks for calls (see poll).
type looker struct {
	procs   int   // GOMAXPROCS, read again every 1024 calls
	gap     int64 // how long the latest call came after the one before returned
	until   int64 // when the worker may look again, after a look that failed
	backoff int64 // how long it does not look after the next look that fails
	slow    int   // the latest takes in a row that were late (see slowTake)
}

const (
	// spinMax bounds how long the worker looks for its next call.
	spinMax = 20 * time.Microsecond
	// slowTake is how long after it was made a call handed to a looking
	// worker may be taken by it: a worker that looks on a processor of
	// its own takes it in well under a microsecond; one that takes longer
	// waited for a processor.
	slowTake = 4 * time.Microsecond
	// slowTakes late takes in a row make a look that did not pay: one
	// alone may be an interrupt, or a yield of the worker's, as it was
	// taking the call; two mean that it waits for its caller's processor.
	slowTakes = 2
	// minBackoff and maxBackoff bound how long a worker does not look
	// after a look that failed.
	minBackoff = 100 * time.Microsecond
	maxBackoff = 10 * time.Millisecond
)

// poll looks for the worker's next call without parking, for at most
// spinMax after the latest call returned (at end, on the mono clock),
// where the latest one came that soon, another processor can run the
// caller meanwhile, and no look failed lately; ok is false when it did
// not look or no call came.
//
// A parked worker costs the caller that hands it a call the scheduler's
// wake-up of another thread (an idle processor is given the goroutine
// made runnable), and costs the call's return a second one for the
// caller: about as much, on an idle machine, as the stats of an unchanged
// checkout. A worker that looks takes its call from the slot with no
// wake-up, and its caller, which waits the same way (see call.wait), sees
// it return without having slept.
//
// A look costs a processor while calls come that often, never longer than
// spinMax, never when calls come slower. Where it does not pay (no call
// came, or two calls in a row were taken late: the worker shares a
// processor with its caller, or every processor is busy, and the
// scheduler gives no wake-up to save), the worker does not look again for
// a while, twice as long after each look that failed, from minBackoff to
// maxBackoff. A call that a caller sent through work as the worker began
// to look ends the look at once, and is taken from there.
func (f *flight[T]) poll(end int64, l *looker) (c *call[T], ok bool) {
	if l.procs < 2 || l.gap >= int64(spinMax) || end < l.until {
		return nil, false
	}
	look := f.looking
	if !f.slot.CompareAndSwap(nil, look) {
		// Another worker looks: one that was ended (see reap) as it began
		// to look, whose caller's call this one ran. That one takes the
		// call a caller puts in the slot; this one parks, and ends with
		// the nil in work, or serves on.
		return nil, false
	}
	yielded := end
	for i := 1; f.slot.Load() == look; i++ {
		if i%16 != 0 {
			continue
		}
		if len(f.work) != 0 {
			// A caller came as the worker began to look, and sent its
			// call through work, or the reaper its nil: take it from
			// there (the nil ends this worker).
			if f.slot.CompareAndSwap(look, nil) {
				return nil, false
			}
			break
		}
		now := mono()
		if now-end > int64(spinMax) {
			if f.slot.CompareAndSwap(look, nil) {
				l.failed(now)
				return nil, false
			}
			break // a call came as the worker stopped looking
		}
		if now-yielded > int64(spinYield) {
			// The caller may wait for this processor: yielding lets it
			// run, and lets the scheduler give one of the two another.
			runtime.Gosched()
			yielded = now
		}
	}
	// Only this worker takes the mark out, and a caller puts a call in
	// for it: the slot holds a call (nil would be none: parked on work).
	if c = f.slot.Swap(nil); c == nil || c == look {
		return nil, false
	}
	now := mono()
	l.gap = now - end
	if now-c.start <= int64(slowTake) {
		l.slow = 0
		l.backoff = int64(minBackoff)
	} else if l.slow++; l.slow == slowTakes {
		l.failed(now)
	}
	return c, true
}

// failed notes a look that did not pay, at now.
func (l *looker) failed(now int64) {
	l.slow = 0
	l.until = now + l.backoff
	l.backoff = min(2*l.backoff, int64(maxBackoff))
}

// run runs one call and hands it to the callers, even when it panics, and
// returns when it returned, on the mono clock.
func (f *flight[T]) run(c *call[T]) (end int64) {
	defer func() {
		end = mono()
		f.ran.Store(end - c.start)
		f.last.Store(c)
		f.inflight.CompareAndSwap(c, nil)
		close(c.done)
	}()
	c.fn(c)
	c.fn = nil
	return // end is set as the call's return is published, above
}

// yields is how many times a caller lets the call run before it sleeps,
// where the worker was parked: a call just handed to it is the next
// goroutine of the caller's processor, so yielding runs it on the
// caller's thread, and a check of an unchanged checkout waits for its
// stats without waking another thread.
const yields = 4

// maxSpin bounds how long a caller looks for the return of its call
// before it sleeps.
const maxSpin = 100 * time.Microsecond

// probeSpin is how long the caller of a call handed to a parked worker
// looks for its return before it yields, where the worker would look for
// its next call (see flight.probe). The call made the worker the next
// goroutine of the caller's processor, and the scheduler woke a thread
// for an idle processor, if there is one, which takes the worker within
// a few microseconds where the caller does not yield: the two then run
// on processors of their own, and the worker's look for the next call
// pays. Where no processor is idle, the caller yields after probeSpin,
// the worker's look fails, and no caller probes until it may look again.
const probeSpin = 5 * time.Microsecond

// spinFor is how long the caller of a call handed to a worker that was
// looking for calls looks for its return before it sleeps: twice as long
// as the latest call ran, plus spinMax, at most maxSpin.
func (f *flight[T]) spinFor() time.Duration {
	return min(2*time.Duration(f.ran.Load())+spinMax, maxSpin)
}

// wait lets the call run and reports whether it returned meanwhile: it
// looks for its return for up to spin (yielding now and then, should the
// worker wait for this processor), then yields to it a few times.
//
// It reads c.done once: the worker writes c.at beside it as it goes, and a
// caller that read the field at every look would take the cache line from
// the worker at every stat.
func (c *call[T]) wait(spin time.Duration) bool {
	done := c.done
	if spin > 0 {
		start := mono()
		yielded := start
	look:
		for i := 1; ; i++ {
			select {
			case <-done:
				return true
			default:
			}
			if i%16 == 0 {
				now := mono()
				switch {
				case time.Duration(now-start) > spin:
					break look
				case now-yielded > int64(spinYield):
					runtime.Gosched() // should the worker wait for this processor
					yielded = now
				}
			}
		}
	}
	for i := 0; i < yields; i++ {
		select {
		case <-done:
			return true
		default:
			runtime.Gosched()
		}
	}
	select {
	case <-done:
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

// spinYield is how long a looking worker, or a caller looking for the
// return of its call, looks before it yields its processor once: the
// scheduler may have put the worker and its caller on one processor.
const spinYield = 5 * time.Microsecond
