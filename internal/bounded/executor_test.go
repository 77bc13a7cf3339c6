package bounded

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blocked queues a piece on x that runs until release is closed, and
// returns once it runs.
func blocked(t *testing.T, x *Executor, release <-chan struct{}) {
	t.Helper()
	running := make(chan struct{})
	go func() {
		_, _ = Submit(context.Background(), x, nil, time.Hour, func(t *Task[int]) {
			close(running)
			<-release
		}, nil)
	}()
	<-running
}

// Callers of a lane that come while one of its pieces waits in the queue
// share that piece: behind a piece that blocks, a hundred callers are
// answered by one run, which began after each of them came.
func TestExecutorCallersShareAPiece(t *testing.T) {
	var x Executor
	var l Lane[int]
	release := make(chan struct{})
	blocked(t, &x, release)
	var runs atomic.Int32
	var wg sync.WaitGroup
	vals := make([]int, 100)
	for i := range vals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, s := Submit(context.Background(), &x, &l, time.Minute, func(t *Task[int]) {
				t.Val = int(runs.Add(1))
			}, nil)
			if assert.Nil(t, s) {
				vals[i] = tk.Val
			}
		}()
	}
	require.Eventually(t, func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		return l.pending != nil && l.pending.waiters == len(vals)
	}, 10*time.Second, time.Millisecond, "the callers wait for one queued piece")
	close(release)
	wg.Wait()
	assert.Equal(t, int32(1), runs.Load())
	for _, v := range vals {
		assert.Equal(t, 1, v)
	}
	// A caller that comes after the piece began gets a piece of its own.
	tk, s := Submit(context.Background(), &x, &l, time.Minute, func(t *Task[int]) { t.Val = int(runs.Add(1)) }, nil)
	require.Nil(t, s)
	assert.Equal(t, 2, tk.Val)
}

// Callers that are ready to run as a piece is queued share it, also
// where nothing blocks the worker: it lets them come before it begins. On
// one processor, forty callers released at once run fewer pieces than
// half their number, and each is answered by a piece that began after it
// came.
func TestExecutorCallersReadyAsAPieceIsQueuedShareIt(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var x Executor
	var l Lane[int64]
	var runs atomic.Int32
	var clock atomic.Int64 // ticks once as each caller comes and as each piece begins
	const callers = 40
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			came := clock.Add(1)
			tk, s := Submit(context.Background(), &x, &l, time.Minute, func(t *Task[int64]) {
				runs.Add(1)
				t.Val = clock.Add(1)
			}, nil)
			if assert.Nil(t, s) {
				assert.Greater(t, tk.Val, came, "a caller is answered by a piece that began after it came")
			}
		}()
	}
	close(start)
	wg.Wait()
	assert.Less(t, int(runs.Load()), callers/2, "pieces run for %d callers ready at once", callers)
}

// A caller whose piece has not begun when its timeout ends, while no
// piece runs, waits for the scheduler, not for a file system: the worker
// is ready to run and has not run yet. It yields to the worker (a few
// times at most) before it gives up, and is answered. On one processor
// beside a goroutine that never yields (the runtime preempts it every
// 10 ms or so), a caller of a 1 ms timeout is answered, not timed out.
func TestExecutorCallerStarvedOfProcessorsIsAnswered(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var x Executor
	var stop atomic.Bool
	spinning := make(chan struct{})
	go func() {
		close(spinning)
		for !stop.Load() {
		}
	}()
	defer stop.Store(true)
	<-spinning
	for i := range 5 {
		tk, s := Submit(context.Background(), &x, nil, time.Millisecond, func(t *Task[int]) { t.Val = i }, nil)
		if assert.Nil(t, s, "check %d: a caller starved of processors gave up", i) {
			assert.Equal(t, i, tk.Val)
		}
	}
}

// A piece that never returns holds the executor's goroutine: its caller
// gives up at its timeout, naming what the piece is on; the next gives up
// at once, queueing nothing; a piece queued behind it whose caller gave up
// is dropped, never run; once the piece returns, the executor serves
// again, and what an abandoned piece holds is released.
func TestExecutorHungPieceTimesOut(t *testing.T) {
	var x Executor
	release := make(chan struct{})
	var held atomic.Int32
	at := "/hung/file"
	_, s := Submit(context.Background(), &x, nil, 50*time.Millisecond, func(t *Task[int]) {
		t.At.Store(&at)
		held.Add(1)
		<-release
		t.Val = 1
	}, func(t *Task[int]) { held.Add(-1) })
	require.NotNil(t, s)
	assert.Equal(t, at, s.At)
	assert.False(t, s.Before)

	var behind atomic.Bool
	_, s = Submit(context.Background(), &x, nil, 10*time.Millisecond, func(*Task[int]) { behind.Store(true) }, nil)
	require.NotNil(t, s, "the piece running is past this caller's timeout")
	assert.True(t, s.Before)
	assert.Equal(t, at, s.At)
	x.mu.Lock()
	assert.Empty(t, x.queue, "queued behind a piece past the timeout")
	x.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	done := make(chan *Stuck)
	go func() {
		_, s := Submit(ctx, &x, nil, time.Hour, func(t *Task[int]) { ran.Store(true) }, nil)
		done <- s
	}()
	require.Eventually(t, func() bool { x.mu.Lock(); defer x.mu.Unlock(); return len(x.queue) == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	s = <-done
	require.NotNil(t, s)
	assert.ErrorIs(t, s.Ctx, context.Canceled)

	close(release)
	require.Eventually(t, func() bool { return held.Load() == 0 }, 10*time.Second, time.Millisecond, "the abandoned piece's hold released")
	tk, s := Submit(context.Background(), &x, nil, time.Minute, func(t *Task[int]) { t.Val = 2 }, nil)
	require.Nil(t, s)
	assert.Equal(t, 2, tk.Val)
	assert.False(t, ran.Load(), "the piece whose caller gave up in the queue ran")
	assert.False(t, behind.Load(), "a piece queued behind the hung one ran")
}

// A piece that panics answers its callers with the error of Panicked,
// made from its value and stack, and one that
// ends its goroutine (runtime.Goexit, as t.FailNow does) with an error;
// neither wedges the executor, which answers the pieces queued behind
// them and the next.
func TestExecutorPanicAndGoexit(t *testing.T) {
	x := Executor{Panicked: func(value any, stack []byte) error { return &panicError{value, stack} }}
	release := make(chan struct{})
	blocked(t, &x, release)
	type result struct {
		tk *Task[int]
		s  *Stuck
	}
	fns := []func(*Task[int]){
		func(*Task[int]) { panic(errors.New("the reader broke")) },
		func(*Task[int]) { runtime.Goexit() },
		func(t *Task[int]) { t.Val = 3 },
	}
	results := make([]chan result, len(fns))
	for i, fn := range fns {
		results[i] = make(chan result, 1)
		go func() {
			tk, s := Submit(context.Background(), &x, nil, time.Minute, fn, nil)
			results[i] <- result{tk, s}
		}()
		require.Eventually(t, func() bool { x.mu.Lock(); defer x.mu.Unlock(); return len(x.queue) == i+1 }, 10*time.Second, time.Millisecond)
	}
	close(release)
	r := <-results[0]
	require.Nil(t, r.s)
	var pe *panicError
	require.ErrorAs(t, r.tk.Err, &pe)
	assert.EqualError(t, pe.value.(error), "the reader broke")
	assert.NotEmpty(t, pe.stack)
	r = <-results[1]
	require.Nil(t, r.s)
	assert.ErrorIs(t, r.tk.Err, ErrExited)
	r = <-results[2]
	require.Nil(t, r.s)
	assert.NoError(t, r.tk.Err)
	assert.Equal(t, 3, r.tk.Val)
	tk, s := Submit(context.Background(), &x, nil, time.Minute, func(t *Task[int]) { runtime.Goexit() }, nil)
	require.Nil(t, s)
	assert.ErrorIs(t, tk.Err, ErrExited)
	tk, s = Submit(context.Background(), &x, nil, time.Minute, func(t *Task[int]) { t.Val = 4 }, nil)
	require.Nil(t, s)
	assert.Equal(t, 4, tk.Val)
}

// panicError is an owner's error of a piece that panicked.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprint("panicked: ", e.value) }

// goroutineID is the number of the calling goroutine, from its stack.
func goroutineID(t *testing.T) string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	require.GreaterOrEqual(t, len(f), 2)
	return f[1]
}

// working reports whether x has a worker.
func working(x *Executor) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.working
}

// Pieces queued while one runs run on its worker, in order, and the
// worker ends once its queue is empty: an executor with nothing to do
// holds no goroutine (soon; the test cannot tell at once from a while
// later), and the next piece starts a worker again.
func TestExecutorRunsItsQueueInOrderOnOneWorkerThatEnds(t *testing.T) {
	var x Executor
	for i := range 3 {
		tk, s := Submit(context.Background(), &x, nil, time.Minute, func(tk *Task[int]) { tk.Val = i }, nil)
		require.Nil(t, s)
		assert.Equal(t, i, tk.Val)
		require.Eventually(t, func() bool { return !working(&x) }, 10*time.Second, 100*time.Microsecond, "the worker ended with its queue")
	}
	release := make(chan struct{})
	blocked(t, &x, release)
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	ids := map[string]bool{}
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, s := Submit(context.Background(), &x, nil, time.Minute, func(*Task[int]) {
				mu.Lock()
				order = append(order, i)
				ids[goroutineID(t)] = true
				mu.Unlock()
			}, nil)
			assert.Nil(t, s)
		}()
		require.Eventually(t, func() bool { x.mu.Lock(); defer x.mu.Unlock(); return len(x.queue) == i+1 }, 10*time.Second, 100*time.Microsecond)
	}
	close(release)
	wg.Wait()
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order, "the queue ran in order")
	assert.Len(t, ids, 1, "the queue ran on one worker: %v", ids)
	require.Eventually(t, func() bool { return !working(&x) }, 10*time.Second, 100*time.Microsecond, "the worker ended with its queue")
}

// Callers behind a piece that never returns each give up at their own
// timeout, whatever the order they came in: a caller of a short timeout
// that comes after one of a long timeout, or of none to speak of, is not
// held to the other's; one whose context ends gives up then. None gives up
// before its timeout.
func TestExecutorCallersGiveUpAtTheirOwnTimeouts(t *testing.T) {
	var x Executor
	release := make(chan struct{})
	defer close(release)
	blocked(t, &x, release)
	type result struct {
		waited time.Duration
		stuck  *Stuck
	}
	timeouts := []time.Duration{time.Hour, 300 * time.Millisecond, 20 * time.Millisecond, 150 * time.Millisecond}
	results := make([]chan result, len(timeouts))
	ctx, cancel := context.WithCancel(context.Background())
	for i, timeout := range timeouts {
		results[i] = make(chan result, 1)
		c := context.Background()
		if timeout == time.Hour {
			c = ctx
		}
		go func() {
			start := time.Now()
			_, s := Submit(c, &x, nil, timeout, func(*Task[int]) {}, nil)
			results[i] <- result{time.Since(start), s}
		}()
		time.Sleep(2 * time.Millisecond) // in this order
	}
	for _, i := range []int{2, 3, 1} {
		var r result
		select {
		case r = <-results[i]:
		case <-time.After(timeouts[i] + 10*time.Second):
			t.Fatalf("the caller of timeout %v is held past it", timeouts[i])
		}
		require.NotNil(t, r.stuck, "a caller behind a hung piece")
		assert.Nil(t, r.stuck.Ctx)
		assert.GreaterOrEqual(t, r.waited, timeouts[i], "a caller gave up before its timeout")
	}
	select {
	case r := <-results[0]:
		t.Fatalf("the caller of an hour gave up after %v", r.waited)
	default:
	}
	cancel()
	r := <-results[0]
	require.NotNil(t, r.stuck)
	assert.ErrorIs(t, r.stuck.Ctx, context.Canceled)
}

// The release of an abandoned piece's holdings runs on the worker, and
// is held to what a piece is: while it hangs, a caller that comes is told
// what the worker is on and, once it has been on it past the caller's
// timeout, gives up at once, queueing nothing; a release that panics or
// ends its goroutine leaves the executor answering the next piece.
func TestExecutorReleaseIsAPieceOfTheWorker(t *testing.T) {
	type ending struct {
		name string
		end  func()
	}
	for _, e := range []ending{
		{"returns", func() {}},
		{"panics", func() { panic("the release broke") }},
		{"exits", runtime.Goexit},
	} {
		t.Run(e.name, func(t *testing.T) {
			var x Executor
			at := "/hung/lock"
			proceed, releasing, hang := make(chan struct{}), make(chan struct{}), make(chan struct{})
			_, s := Submit(context.Background(), &x, nil, 10*time.Millisecond, func(t *Task[int]) {
				t.At.Store(&at)
				<-proceed
			}, func(*Task[int]) {
				close(releasing)
				<-hang
				e.end()
			})
			require.NotNil(t, s, "the caller gave up on the piece")
			close(proceed)
			<-releasing

			start := time.Now()
			_, s = Submit(context.Background(), &x, nil, 30*time.Millisecond, func(*Task[int]) {}, nil)
			require.NotNil(t, s, "a caller behind a hung release")
			assert.Equal(t, at, s.At, "the caller is told what the worker is on")
			assert.Less(t, time.Since(start), 10*time.Second)
			_, s = Submit(context.Background(), &x, nil, time.Nanosecond, func(*Task[int]) {}, nil)
			require.NotNil(t, s)
			assert.True(t, s.Before, "the release has run past this caller's timeout: it gives up at once")
			x.mu.Lock()
			assert.Empty(t, x.queue, "queued behind a hung release")
			x.mu.Unlock()

			close(hang)
			tk, s := Submit(context.Background(), &x, nil, time.Minute, func(t *Task[int]) { t.Val = 5 }, nil)
			require.Nil(t, s, "the executor answers once the release ended")
			assert.Equal(t, 5, tk.Val)
			require.Eventually(t, func() bool { return !working(&x) }, 10*time.Second, 100*time.Microsecond, "the worker ended with its queue")
		})
	}
}

// Shared gives every caller of a key the same executor while it lives,
// and other keys executors of their own.
func TestSharedExecutors(t *testing.T) {
	a, b := Shared("test a", nil), Shared("test b", nil)
	assert.Same(t, a, Shared("test a", nil))
	assert.NotSame(t, a, b)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}

// The workers of the process's executors are at most the bound: a piece
// that would start one past it is refused at once, saying why, while an
// executor whose worker lives still queues pieces; once a worker ends, a
// piece starts one again.
func TestWorkersAreBounded(t *testing.T) {
	defer SetMaxWorkers(SetMaxWorkers(Workers() + 2))
	var a, b, c Executor
	release := make(chan struct{})
	blocked(t, &a, release)
	blocked(t, &b, release)
	_, s := Submit(context.Background(), &c, nil, time.Hour, func(t *Task[int]) {}, nil)
	require.NotNil(t, s, "a third worker started past the bound")
	assert.Contains(t, s.Full, "the most it runs at once")
	// A live worker takes more pieces: its caller waits behind the one
	// running.
	queued := make(chan *Stuck, 1)
	go func() {
		_, s := Submit(context.Background(), &a, nil, time.Hour, func(t *Task[int]) {}, nil)
		queued <- s
	}()
	close(release)
	assert.Nil(t, <-queued, "a piece of an executor whose worker lives")
	require.Eventually(t, func() bool {
		_, s := Submit(context.Background(), &c, nil, time.Hour, func(t *Task[int]) {}, nil)
		return s == nil
	}, 10*time.Second, time.Millisecond, "no worker started once the others ended")
}

// A hang is waited for once: a caller that comes once the piece running
// has held the executor for its timeout gives up at once, and so does the
// one that comes the instant the caller before it gave up on the piece
// after its timeout, however late the worker was scheduled to begin the
// piece (a piece holds the executor from the moment it could begin). It
// runs on synctest's clock, so the instants are exact.
func TestExecutorHangIsWaitedForOnce(t *testing.T) {
	const timeout = 5 * time.Second
	for _, late := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("the worker began the piece %v late", late), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var x Executor
				release := make(chan struct{})
				defer close(release)
				at := "/hung/home"
				began := time.Now()
				_, s := Submit(context.Background(), &x, nil, timeout, func(t *Task[int]) {
					t.At.Store(&at)
					<-release
				}, nil)
				require.NotNil(t, s)
				assert.Equal(t, timeout, time.Since(began), "the first caller waits its timeout")
				assert.False(t, s.Before)
				// synctest's worker begins at once; a worker scheduled
				// late begins the piece later than it was queued.
				x.mu.Lock()
				x.running.start = x.running.start.Add(late)
				x.mu.Unlock()

				start := time.Now()
				var ran atomic.Bool
				_, s = Submit(context.Background(), &x, nil, timeout, func(*Task[int]) { ran.Store(true) }, nil)
				require.NotNil(t, s)
				assert.Zero(t, time.Since(start), "the next caller gives up at once")
				assert.True(t, s.Before)
				assert.Equal(t, at, s.At)
				assert.Equal(t, timeout, s.Since)
				x.mu.Lock()
				assert.Empty(t, x.queue, "queued behind a hang a caller gave up on")
				x.mu.Unlock()
				assert.False(t, ran.Load())
			})
		})
	}
	// A piece queued behind another holds the executor once that one
	// ended: the time it waited in the queue is not counted as its hang.
	synctest.Test(t, func(t *testing.T) {
		var x Executor
		first, second := make(chan struct{}), make(chan struct{})
		defer close(second)
		blocked(t, &x, first)
		go func() {
			_, _ = Submit(context.Background(), &x, nil, time.Hour, func(*Task[int]) { <-second }, nil)
		}()
		synctest.Wait()
		time.Sleep(timeout - time.Second)
		close(first) // the second piece begins, and hangs
		synctest.Wait()
		time.Sleep(2 * time.Second)
		start := time.Now()
		_, s := Submit(context.Background(), &x, nil, timeout, func(*Task[int]) {}, nil)
		require.NotNil(t, s)
		assert.False(t, s.Before, "the second piece has held the executor 2s of the caller's 5s")
		assert.Equal(t, timeout, time.Since(start), "the caller waits its own timeout")
	})
}
