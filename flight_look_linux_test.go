package runtimeguard

// The tests below hand calls to a flight's own worker, on its own
// goroutine, as it looks for them (see poll), and read what the worker
// decided from what it leaves for its callers: whether it takes a call
// from the slot (hand reports it) and, as it parks, whether it would look
// for the next call (flight.probe). A trial speaks only where the machine
// ran the test and the worker as the trial needs (each call handed to the
// worker as it looked, a call meant in time taken in time, each call come
// soon after the one before): the others are made again, and a test fails
// where none spoke. They need the worker to take a call within slowTake
// (4 µs) of its caller's hand, now and then: they run where the scheduler
// does so (Linux); under Wine a yield alone can take milliseconds.

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lookCall makes a call of f as do makes one, under f.mu, and hands it to
// f's worker, reporting whether the worker was looking for it. The call's
// caller arrived now, or, if late, long enough ago that the worker takes
// the call late (see slowTake). Its work sets val to when it began, then
// runs then, if not nil.
func lookCall(f *flight[int64], late bool, then func()) (c *call[int64], looking bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started++
	c = &call[int64]{seq: f.started, start: mono(), done: make(chan struct{})}
	if late {
		c.start -= int64(time.Millisecond)
	}
	c.fn = func(c *call[int64]) {
		c.val = mono()
		if then != nil {
			then()
		}
	}
	f.inflight.Store(c)
	return c, f.hand(c)
}

// awaitLooking looks, for up to d, for f's worker to look for calls, and
// reports whether it saw it.
func awaitLooking(f *flight[int64], d time.Duration) bool {
	for start := mono(); mono()-start < int64(d); {
		if f.slot.Load() == f.looking {
			return true
		}
	}
	return false
}

// awaitDone waits for c to return, looking for it without parking (so
// that the test goes on as soon as it returns, while the worker looks for
// the next call), for up to 10 s.
func awaitDone(t *testing.T, c *call[int64]) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-c.done:
			return
		default:
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "a call handed to the worker did not return")
		}
	}
}

// lookTrial hands f's worker a call in time, then one late or in time for
// each of lates, each as the worker looks for it; the last of them makes
// one more call as it runs, which its caller sends through work (the
// worker does not look as it runs a call), and whose work reads f.probe:
// what the worker, parked, or ending its look at the call in work, knows
// of its looks. ok is false where the trial does not speak; stopped is
// true where the worker parked within minBackoff of the last take, so
// that a worker that stopped looking at that take still does not look.
func lookTrial(t *testing.T, f *flight[int64], lates ...bool) (probe, stopped, ok bool) {
	t.Helper()
	// A call before the trial's, for when the first of them came.
	c, _ := lookCall(f, false, nil)
	awaitDone(t, c)
	end := c.start + f.ran.Load()
	lates = append([]bool{false}, lates...)
	for i, late := range lates {
		awaitLooking(f, 200*time.Microsecond)
		handed := mono()
		var (
			last        *call[int64]
			lastLooking bool
			read        bool
			then        func()
		)
		if i == len(lates)-1 {
			then = func() {
				last, lastLooking = lookCall(f, false, func() { read = f.probe.Load() })
			}
		}
		c, looking := lookCall(f, late, then)
		awaitDone(t, c)
		if last != nil {
			awaitDone(t, last)
			assert.False(t, lastLooking, "a call made as the worker ran a call was taken from the slot")
		}
		switch {
		case !looking: // the worker did not look for the call, or stopped first
			return false, false, false
		case !late && c.val-c.start > int64(slowTake): // taken late
			return false, false, false
		case c.val-end >= int64(spinMax): // came long after the call before
			return false, false, false
		case last != nil:
			return read, last.val-handed < int64(minBackoff), true
		}
		end = c.start + f.ran.Load()
	}
	return false, false, false
}

// lookTrials runs lookTrial on a new flight until n trials spoke, or too
// many did not, and returns what the worker, parked after each that spoke,
// knew of its looks: where want is false (the worker is to stop looking),
// only the trials in which it parked within minBackoff of its last take
// speak.
func lookTrials(t *testing.T, n int, want bool, lates ...bool) (probes []bool) {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	f := flight[int64]{idle: time.Hour}
	i := 0
	for ; i < 400*n && len(probes) < n; i++ {
		if probe, stopped, ok := lookTrial(t, &f, lates...); ok && (want || stopped) {
			probes = append(probes, probe)
		}
	}
	t.Logf("%d of %d trials spoke", len(probes), i)
	require.NotEmpty(t, probes, "no trial spoke: the worker never looked for the calls as the trial needs (or the machine never ran it and the test so)")
	assert.Equal(t, 1, flightWorkers(&f), "workers of a flight whose calls go on")
	return probes
}

// A call a caller sent through work as the worker began to look (before
// its mark was in the slot) ends the look at once, and the worker takes
// it from work: the look does not count as one that failed, and the
// worker, taking it, would still look for the next call. One that looked
// on until spinMax, and counted the look as failed, would not.
func TestFlightAttackLookEndsAtACallInWork(t *testing.T) {
	for i, probe := range lookTrials(t, 20, true) {
		assert.True(t, probe, "trial %d: the worker counted a look that ended at a call in work as failed", i)
	}
}

// A call taken late by a worker that looks for calls (it was interrupted
// as the call came) does not stop its looks: it looks for the next call.
// Two late takes in a row do; a take in time between two late ones starts
// the count again.
func TestFlightAttackLooksStopAfterTwoLateTakes(t *testing.T) {
	t.Run("late", func(t *testing.T) {
		for i, probe := range lookTrials(t, 10, true, true) {
			assert.True(t, probe, "trial %d: one late take stopped the looks", i)
		}
	})
	t.Run("late,late", func(t *testing.T) {
		for i, probe := range lookTrials(t, 10, false, true, true) {
			assert.False(t, probe, "trial %d: two late takes in a row did not stop the looks", i)
		}
	})
	t.Run("late,in-time,late", func(t *testing.T) {
		for i, probe := range lookTrials(t, 10, true, true, false, true) {
			assert.True(t, probe, "trial %d: a take in time did not start the count of late takes again", i)
		}
	})
}
