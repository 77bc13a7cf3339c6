package runtimeguard

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goroutineID is the calling goroutine's number, from its stack's header
// ("goroutine 42 [running]:").
func goroutineID(t testing.TB) uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	require.GreaterOrEqual(t, len(f), 2, "%q", buf)
	id, err := strconv.ParseUint(string(f[1]), 10, 64)
	require.NoError(t, err, "%q", buf)
	return id
}

// goroutineParked waits, for up to 5 s, for goroutine id to wait in the
// given state ("chan receive"), and reports whether it did.
func goroutineParked(id uint64, state string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if bytes.Contains(allStacks(), []byte(fmt.Sprintf("goroutine %d [%s", id, state))) {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// allStacks is the stacks of the process's goroutines.
func allStacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// goroutineLives reports whether goroutine id is among the process's.
func goroutineLives(id uint64) bool {
	return bytes.Contains(allStacks(), []byte(fmt.Sprintf("goroutine %d [", id)))
}

// Calls that follow one another run on one goroutine, the flight's
// worker: a check of an unchanged checkout hands its stats to a parked
// goroutine rather than starting one (whose start and stack growth cost
// more than the stats).
func TestFlightCallsShareAWorker(t *testing.T) {
	f := flight[uint64]{idle: time.Hour}
	var first uint64
	for i := 0; i < 1000; i++ {
		c, stuck := f.do(5*time.Second, func(c *call[uint64]) { c.val = goroutineID(t) })
		require.Nil(t, stuck)
		if i == 0 {
			first = c.val
		}
		require.Equal(t, first, c.val, "call %d ran on another goroutine", i)
	}
}

// A worker with no calls for its idle interval ends: a guard dropped
// without Close leaves no goroutine behind for long.
func TestFlightWorkerEnds(t *testing.T) {
	f := flight[uint64]{idle: 5 * time.Millisecond}
	c, stuck := f.do(5*time.Second, func(c *call[uint64]) { c.val = goroutineID(t) })
	require.Nil(t, stuck)
	deadline := time.Now().Add(5 * time.Second)
	for goroutineLives(c.val) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	assert.False(t, goroutineLives(c.val), "the worker still lives")
	f.mu.Lock()
	assert.False(t, f.worker)
	f.mu.Unlock()

	// And the next call starts another.
	c2, stuck := f.do(5*time.Second, func(c *call[uint64]) { c.val = goroutineID(t) })
	require.Nil(t, stuck)
	assert.NotEqual(t, c.val, c2.val)
}

// A worker that ended leaves no probe set (see flight.probe): the caller
// that starts the next worker does not look for its answer as if a
// parked worker would look for its next call.
func TestFlightEndedWorkerLeavesNoProbe(t *testing.T) {
	f := flight[uint64]{idle: 200 * time.Millisecond}
	c, stuck := f.do(5*time.Second, func(c *call[uint64]) { c.val = goroutineID(t) })
	require.Nil(t, stuck)
	// Once the worker parked (and wrote its probe), as one parked after
	// calls that came often, it would look for the next one.
	require.True(t, goroutineParked(c.val, "chan receive"), "the worker did not park")
	f.probe.Store(true)
	require.Zero(t, waitWorkers(&f), "the worker did not end")
	assert.False(t, f.probe.Load(), "the ended worker's probe is still set")
}

// Calls that come as the worker decides to end are never handed to a
// worker that ended: each is answered. Run with -race.
func TestFlightCallsRacingTheWorkersEnd(t *testing.T) {
	f := flight[int]{idle: 200 * time.Microsecond}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		c, stuck := f.do(10*time.Second, func(c *call[int]) { c.val = i })
		require.Nil(t, stuck, "call %d", i)
		require.Equal(t, i, c.val)
		time.Sleep(time.Duration(rng.IntN(400)) * time.Microsecond)
	}
}

// A worker whose idle interval passes again and again while a call waits
// for it in the channel (an interval of a nanosecond, so that its timer
// is due at nearly every turn) takes that call before it ends: no call is
// left to a worker that ended, which would hold up every later caller.
func TestFlightWorkerEndsWithACallHanded(t *testing.T) {
	f := flight[int]{idle: time.Nanosecond}
	for i := 0; i < 20000; i++ {
		c, stuck := f.do(5*time.Second, func(c *call[int]) { c.val = i })
		require.Nil(t, stuck, "call %d", i)
		require.Equal(t, i, c.val)
	}
}

// Callers from many goroutines around a worker that keeps ending are each
// answered by a call that began after they arrived.
func TestFlightConcurrentCallers(t *testing.T) {
	f := flight[int64]{idle: 100 * time.Microsecond}
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func() {
			var err error
			for i := 0; i < 300 && err == nil; i++ {
				arrived := time.Now().UnixNano()
				c, stuck := f.do(10*time.Second, func(c *call[int64]) { c.val = time.Now().UnixNano() })
				switch {
				case stuck != nil:
					err = fmt.Errorf("stuck on %q after %v", stuck.at, stuck.since)
				case c.val < arrived:
					err = fmt.Errorf("answered by a call that began %d ns before the caller arrived", arrived-c.val)
				}
				if i%16 == 0 {
					time.Sleep(200 * time.Microsecond)
				}
			}
			done <- err
		}()
	}
	for g := 0; g < 8; g++ {
		assert.NoError(t, <-done)
	}
}

// spinFor waits about d without sleeping: the gaps between calls that a
// worker's look for its next call (poll) is about, shorter than a sleep.
func spinFor(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// answeredCalls makes n calls of f, seeded by seed, each after a gap of up
// to twice the worker's look for calls, and returns the first that was
// stuck, or answered by a call that began before its caller arrived.
func answeredCalls(f *flight[int64], seed uint64, n int) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < n; i++ {
		arrived := mono()
		c, stuck := f.do(10*time.Second, func(c *call[int64]) { c.val = mono() })
		switch {
		case stuck != nil:
			return fmt.Errorf("call %d: stuck on %q after %v", i, stuck.at, stuck.since)
		case c.val < arrived:
			return fmt.Errorf("call %d: answered by a call that began %d ns before the caller arrived", i, arrived-c.val)
		}
		spinFor(time.Duration(rng.IntN(int(2 * spinMax))))
	}
	return nil
}

// Calls that come as the worker looks for them, stops looking, parks, or
// is ended (an idle interval from a nanosecond up, so that the reaper
// ends workers as they look, and a new worker serves beside one that
// still looks), from one goroutine and from several, each with gaps
// around the look's length: each is answered by a call that began after
// its caller arrived, and none is lost. Run with -race.
func TestFlightCallsRacingTheWorkersLook(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, idle := range []time.Duration{time.Nanosecond, 50 * time.Microsecond, time.Hour} {
		t.Run(idle.String(), func(t *testing.T) {
			f := flight[int64]{idle: idle}
			done := make(chan error)
			callers := 3
			for g := 0; g < callers; g++ {
				go func(g int) { done <- answeredCalls(&f, uint64(g), 3000) }(g)
			}
			for g := 0; g < callers; g++ {
				assert.NoError(t, <-done)
			}
		})
	}
}

// A worker looks for its next call only for a moment after a call: once
// calls stop, it parks, and holds no processor.
func TestFlightWorkerStopsLooking(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	f := flight[int]{idle: time.Hour}
	looked := false
	for i := 0; i < 2000; i++ {
		c, stuck := f.do(5*time.Second, func(c *call[int]) { c.val = i })
		require.Nil(t, stuck)
		require.Equal(t, i, c.val)
		looked = looked || f.slot.Load() == f.looking
	}
	assert.True(t, looked, "the worker never looked for a call: the test tests nothing")
	deadline := time.Now().Add(5 * time.Second)
	for f.slot.Load() != nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.Nil(t, f.slot.Load(), "the worker still looks for calls")
	time.Sleep(10 * time.Millisecond)
	assert.Nil(t, f.slot.Load(), "the worker looked again with no call")
}

// lookingFlight is a flight set up for its worker's looks, which the test
// makes itself: it calls poll in its own goroutine, in the worker's place.
func lookingFlight() *flight[int] {
	return &flight[int]{work: make(chan *call[int], 1), looking: new(call[int])}
}

// handWhenLooking puts c in f's slot once a look has marked it, as the
// caller of a worker that looks does.
func handWhenLooking(f *flight[int], c *call[int]) {
	for !f.slot.CompareAndSwap(f.looking, c) {
		runtime.Gosched()
	}
}

// A call taken late once (the worker was interrupted, or yielded, as it
// came) does not stop the worker's looks: two in a row do, which say that
// the worker waits for its caller's processor. A call taken in time, or a
// look that failed, starts the count again.
func TestFlightLooksStopAfterTwoLateTakes(t *testing.T) {
	// The look, whose end is an hour away, does not yield: the caller that
	// hands it its call needs a processor of its own.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	f := lookingFlight()
	l := looker{procs: 2, backoff: int64(minBackoff)}
	// take has the test's look take a call: late, made well before the
	// take, or in time, dated after it. The look ends an hour from now: it
	// waits for the call however slowly the test runs.
	take := func(late bool) {
		t.Helper()
		c := &call[int]{start: mono() + int64(time.Hour)}
		if late {
			c.start = mono() - int64(2*slowTake)
		}
		go handWhenLooking(f, c)
		got, ok := f.poll(mono()+int64(time.Hour), &l)
		require.True(t, ok, "the look took no call")
		require.Same(t, c, got)
		require.Nil(t, f.slot.Load(), "the look left its mark")
	}
	take(true)
	assert.Zero(t, l.until, "one late take stopped the looks")
	take(false)
	take(true)
	assert.Zero(t, l.until, "a late take after one in time stopped the looks")
	take(true)
	require.NotZero(t, l.until, "two late takes in a row did not stop the looks")
	until := l.until
	assert.Equal(t, 2*int64(minBackoff), l.backoff, "the next stop is not twice as long")
	take(true)
	assert.Equal(t, until, l.until, "the late take after a stop counted the one before it")
	take(false)
	assert.Equal(t, int64(minBackoff), l.backoff, "a take in time did not end the backoff")
}

// A caller that came as the worker began to look, before its mark was in
// the slot, sends its call through work: the look takes it from there at
// once, rather than look until spinMax for a call that came, and does not
// count as a look that failed.
func TestFlightLookTakesACallSentThroughWork(t *testing.T) {
	f := lookingFlight()
	l := looker{procs: 2, backoff: int64(minBackoff)}
	c := &call[int]{}
	f.work <- c
	got, ok := f.poll(mono(), &l)
	assert.False(t, ok, "the look took a call from the slot")
	assert.Nil(t, got)
	assert.Nil(t, f.slot.Load(), "the look left its mark")
	assert.Zero(t, l.until, "the look counted as one that failed")
	select {
	case got := <-f.work:
		assert.Same(t, c, got)
	default:
		t.Fatal("the call sent through work is gone")
	}
}

// BenchmarkBoundHandoff is what bounding a check's wait costs with no work
// at all: a call handed to the flight's worker and waited for.
func BenchmarkBoundHandoff(b *testing.B) {
	var f flight[int]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if c, stuck := f.do(time.Second, func(c *call[int]) { c.val = 1 }); stuck != nil || c.val != 1 {
			b.Fatal(stuck)
		}
	}
}
