// Package bounded runs work on a file system that may never answer: an
// [Executor] runs pieces of work one at a time on one goroutine, and no
// caller waits for its piece past its timeout or its context, so a file
// system that hangs holds at most one goroutine per executor ([Shared]
// gives the process one executor per thing read), and the process at most
// [MaxWorkers] in all. A piece's panic is
// recovered and becomes an error in its owner's words (see
// [Executor.Panicked]).
package bounded

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Executor runs work on one kind of files (a guard uses two, which the
// guards of a process that read the same files share: see [Shared]; one
// for its checkout, its binds and the looks of its checks; one for the
// updater's files, its plans and receipt listings) one piece at a
// time, in order, on one goroutine: the worker, started by the first
// piece queued while none lives, which ends once the queue is empty. A
// caller waits for its work at most its timeout, or until its context
// ends, then gives up and leaves the work behind: a piece that no caller
// waits for any more is dropped unread, or released once it returns. The
// release is the worker's as the piece was: callers that come while it
// runs wait behind it, and it ends the worker no more than a piece does.
//
// Before it begins each piece, the worker yields once to the goroutines
// ready to run: the callers of a [Lane] among them come while its piece
// is queued and share it, rather than queue one each behind it. Under
// load, so, one look at the checkout answers several checks, each of
// which came before it began.
//
// So a file system that never answers holds the executor's one goroutine,
// whatever the number of callers, until it answers; work queued behind it
// waits, and a caller that comes once the piece has held the executor for
// its timeout gives up at once, queueing nothing. A piece holds the
// executor from the moment it could begin (it was queued, or the piece
// before it ended), not from the moment the worker was scheduled to run
// it: a caller that gave up on it after its timeout is followed by none
// that waits for it again. An executor with nothing to
// do holds no goroutine. The workers of all the executors of the process
// are at most [MaxWorkers] at once: a piece that would start one past it
// is refused at once (see [Stuck].Full), so that file systems that stopped
// answering hold a fixed number of goroutines, whatever the executors
// (whatever the paths read).
//
// The timeout bounds a caller's wait on a file system, not on the Go
// scheduler: a caller whose timeout ends while its piece has not begun
// and none runs (the worker is ready, not yet scheduled, as the process's
// processors are busy) yields to it a few times before it gives up.
//
// Its functions ([Submit], [Await]) are safe for concurrent use; an
// Executor must not be copied once used.
//
// The zero Executor is ready.
type Executor struct {
	// Panicked makes the error of a piece that panicked and did not
	// recover, from the value it panicked with and the goroutine's stack;
	// nil makes an error that names the value. It is set before the
	// executor is first used, and not changed after.
	Panicked func(value any, stack []byte) error

	mu      sync.Mutex
	queue   []*job
	running *job      // the piece the worker runs, or nil
	freed   time.Time // when the last piece that ran ended
	working bool      // a worker lives: it takes the queue, then ends
}

// job is one piece of work. done is closed once it ended, or once it was
// dropped unread, under the executor's lock. Its exported fields are
// promoted to [Task].
type job struct {
	run     func()
	release func() // run once it ended, when no caller waited for it any more
	taken   func() // run, under the lock, as the worker takes it
	done    chan struct{}
	start   time.Time // when the worker took it; zero while queued
	queued  time.Time // when it was queued
	// ready is when the executor could begin it: the later of queued and
	// the end of the piece before it. A piece holds the executor from
	// then, as its callers' waits count; it is set with start.
	ready   time.Time
	waiters int // callers waiting for it
	// At names what the piece is waiting on now (a path, or what it
	// does), for the error of a caller that gave up on it; nil when
	// nothing is known. The piece stores it as it goes; the executor
	// loads it, concurrently.
	At atomic.Pointer[string]
	// Err is set when the piece panicked (the error of
	// [Executor.Panicked]) or ended its goroutine ([ErrExited]), rather
	// than return. It is written before
	// the piece's callers are answered, and read only after.
	Err error
}

// ErrExited is the error of work that ended its goroutine (runtime.Goexit).
var ErrExited = errors.New("the read ended its goroutine")

// where is what the piece is on now, or "".
func (j *job) where() string {
	if p := j.At.Load(); p != nil {
		return *p
	}
	return ""
}

// Task is a piece of work with its result. The piece writes Val as it
// runs; its callers read it once [Submit] returned the Task, and a Task
// shared by the callers of a [Lane] must not be written by them.
type Task[T any] struct {
	job
	// Val is the piece's result.
	Val T
}

// Lane is a kind of work whose callers share pieces: one that comes while
// a piece of the lane is queued, not yet begun, waits for that one rather
// than queue another. So every caller is answered by a piece that began
// after it came. Its fields are protected by the executor's lock: a Lane
// belongs to one [Executor]. The zero Lane is ready.
type Lane[T any] struct {
	pending *Task[T] // queued, not yet begun
	latest  *Task[T] // the latest piece queued
}

// MaxWorkers bounds the workers of the process's executors that live at
// once: the goroutines that run their pieces, each of which a file system
// that stopped answering may hold for good. Past it no executor starts a
// worker: a piece that would start one is refused at once.
const MaxWorkers = 64

// workers counts the workers that live, and max is their bound: see
// MaxWorkers and SetMaxWorkers.
var workers struct {
	n, max atomic.Int64
}

func init() { workers.max.Store(MaxWorkers) }

// SetMaxWorkers sets the bound of the workers that live at once to n,
// for a test that shows it, and returns the bound it replaces.
func SetMaxWorkers(n int) int { return int(workers.max.Swap(int64(n))) }

// Workers is the number of workers of the process's executors that live.
func Workers() int { return int(workers.n.Load()) }

// startWorker counts a worker that is to start, unless the bound is
// reached: then it reports false, counting nothing.
func startWorker() bool {
	for {
		n := workers.n.Load()
		if n >= workers.max.Load() {
			return false
		}
		if workers.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Stuck says why a caller gave up: what the piece it waited behind is on,
// and for how long it waited or that piece had run; or its context's end;
// or that no worker could start.
type Stuck struct {
	// At is what the piece running was on ("" when unknown).
	At string
	// Since is how long the caller waited, or, when Before, how long the
	// piece running had held the executor when the caller came.
	Since time.Duration
	// Before is true when the piece running had held the executor for
	// the caller's timeout already when it came.
	Before bool
	// Ctx is the caller's context's error when it ended; nil otherwise.
	Ctx error
	// Full, when not empty, says that the piece was refused at once: it
	// needed a worker, and the process's executors had MaxWorkers.
	Full string
}

// Submit runs fn on x, sharing the piece queued on l (nil: a piece of its
// own), and waits for it at most timeout, or until ctx ends. release, when
// not nil, releases what a piece that no caller took holds; it runs on the
// executor's goroutine once fn ended (returned, panicked or ended its
// goroutine), as the piece running: callers that come meanwhile are told
// its At, which release may store, and how long the piece has held the executor. A panic
// of release is dropped, there being no caller to tell.
//
// It returns the Task once the piece returned (its Err says whether it
// panicked or ended its goroutine), else why the caller gave up; a caller
// that comes once the piece running has held the executor for its timeout
// gives up at once, queueing nothing.
func Submit[T any](ctx context.Context, x *Executor, l *Lane[T], timeout time.Duration, fn func(*Task[T]), release func(*Task[T])) (*Task[T], *Stuck) {
	x.mu.Lock()
	if r := x.running; r != nil {
		if since := time.Since(r.ready); since >= timeout {
			x.mu.Unlock()
			return nil, &Stuck{At: r.where(), Since: since, Before: true}
		}
	}
	var t *Task[T]
	if l != nil && l.pending != nil {
		t = l.pending
		t.waiters++
	} else {
		if !x.working && !startWorker() {
			x.mu.Unlock()
			return nil, &Stuck{Full: fmt.Sprintf("the process runs %d workers on file systems, the most it runs at once (file systems that stopped answering hold them)", workers.max.Load())}
		}
		t = &Task[T]{job: job{done: make(chan struct{}), waiters: 1, queued: time.Now()}}
		t.run = func() { fn(t) }
		if release != nil {
			t.release = func() { release(t) }
		}
		if l != nil {
			l.pending, l.latest = t, t
			t.taken = func() {
				if l.pending == t {
					l.pending = nil
				}
			}
		}
		x.queue = append(x.queue, &t.job)
		if !x.working {
			x.working = true
			go x.serve()
		}
	}
	x.mu.Unlock()
	if s := x.wait(ctx, &t.job, timeout); s != nil {
		return nil, s
	}
	return t, nil
}

// Await waits at most timeout for the latest piece of l, if any, to
// return, and reports whether it did. It queues nothing.
func Await[T any](x *Executor, l *Lane[T], timeout time.Duration) bool {
	x.mu.Lock()
	t := l.latest
	x.mu.Unlock()
	if t == nil {
		return true
	}
	select {
	case <-t.done:
		return true
	default:
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-t.done:
		return true
	case <-timer.C:
		return false
	}
}

// starvedYields bounds the yields of a caller whose timeout ended while
// its piece waited for the worker to be scheduled (see wait): bounded, so
// that however busy the processors, a caller waits past its timeout by a
// few yields at most.
const starvedYields = 3

// wait waits for j as Submit does.
func (x *Executor) wait(ctx context.Context, j *job, timeout time.Duration) *Stuck {
	select {
	case <-j.done:
		return nil
	default:
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	s := &Stuck{Since: timeout}
	select {
	case <-j.done:
		return nil
	case <-timer.C:
		// A piece not begun while none runs waits for the worker to be
		// scheduled, not for a file system (the process's processors
		// are busy): the caller yields to it, at most starvedYields
		// times, and is answered where the worker ran the piece
		// meanwhile.
		for range starvedYields {
			x.mu.Lock()
			starved := x.running == nil && j.start.IsZero()
			x.mu.Unlock()
			if !starved {
				break
			}
			runtime.Gosched()
		}
	case <-ctx.Done():
		s.Ctx = ctx.Err()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	select {
	case <-j.done: // returned as the caller gave up
		return nil
	default:
	}
	j.waiters--
	if j.waiters == 0 && j.start.IsZero() {
		for i, q := range x.queue {
			if q == j {
				x.queue = append(x.queue[:i], x.queue[i+1:]...)
				break
			}
		}
		if j.taken != nil {
			j.taken() // no longer pending on its lane
		}
		close(j.done)
	}
	if r := x.running; r != nil {
		s.At = r.where()
	}
	return s
}

// serve is the worker: it runs the queue's pieces, and ends once the
// queue is empty. Before each piece it yields once (see [Executor]). A
// piece or a release that ends the goroutine (runtime.Goexit) hands the
// queue to another worker, which takes its place in the count of workers.
func (x *Executor) serve() {
	exited := true
	defer func() {
		if exited {
			go x.serve()
		}
	}()
	for {
		runtime.Gosched()
		x.mu.Lock()
		if len(x.queue) == 0 {
			x.working = false
			workers.n.Add(-1)
			x.mu.Unlock()
			exited = false
			return
		}
		j := x.queue[0]
		x.queue[0] = nil
		x.queue = x.queue[1:]
		j.start = time.Now()
		j.ready = j.queued
		if x.freed.After(j.ready) {
			j.ready = x.freed
		}
		x.running = j
		if j.taken != nil {
			j.taken()
		}
		x.mu.Unlock()
		x.runOne(j)
	}
}

// runOne runs j, then answers its callers or releases what it holds
// (finish); a panic that j did not recover becomes its error of
// Panicked, and an end of its goroutine its ErrExited.
func (x *Executor) runOne(j *job) {
	returned := false
	defer func() {
		if !returned {
			if p := recover(); p != nil {
				j.Err = x.panicked(p, debug.Stack())
			} else {
				j.Err = ErrExited
			}
		}
		x.finish(j)
	}()
	j.run()
	returned = true
}

// panicked is the error of a piece that panicked with value.
func (x *Executor) panicked(value any, stack []byte) error {
	if x.Panicked != nil {
		return x.Panicked(value, stack)
	}
	return fmt.Errorf("a piece of work panicked: %v", value)
}

// finish answers j's callers and, when none is left, releases what j
// holds. The release is the worker's piece until it ends: the piece
// running, as callers that come meanwhile see it. It has no caller to
// tell of a panic, which ends it as a return would.
func (x *Executor) finish(j *job) {
	x.mu.Lock()
	release := j.waiters == 0 && j.release != nil
	close(j.done)
	if !release {
		x.running, x.freed = nil, time.Now()
	}
	x.mu.Unlock()
	if !release {
		return
	}
	defer func() {
		_ = recover()
		x.mu.Lock()
		x.running, x.freed = nil, time.Now()
		x.mu.Unlock()
	}()
	j.release()
}
