package runtimeguard

// The test below measures waits of about 100 µs: it runs where the
// clock and the scheduler resolve them (Linux); under Wine a sleep or a
// yield alone can take milliseconds.

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A caller's timeout bounds its whole wait, from its arrival: the looks
// for its call's return (up to maxSpin, where the call went to a worker
// that looked for it) count against it, rather than coming before it.
// With a timeout of a nanosecond and a call that hangs, a caller whose
// call was handed to a looking worker (after a call that ran long, so
// that it would look for maxSpin) gives up at once, not after maxSpin.
func TestFlightAttackTimeoutBoundsTheLook(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	f := flight[int]{idle: time.Hour}
	const trials = 40
	long := 0
	var slowest time.Duration
	for i := 0; i < trials; i++ {
		// Past the worker's backoff from a look that failed (the one after
		// the hung call of the trial before), then two calls in a row: after
		// the second, the worker looks for the next.
		time.Sleep(maxBackoff + 2*time.Millisecond)
		_, stuck := f.do(5*time.Second, func(c *call[int]) {})
		require.Nil(t, stuck)
		_, stuck = f.do(5*time.Second, func(c *call[int]) { spinFor(300 * time.Microsecond) })
		require.Nil(t, stuck)
		release := make(chan struct{})
		start := time.Now()
		_, stuck = f.do(time.Nanosecond, func(c *call[int]) { <-release })
		took := time.Since(start)
		close(release)
		require.NotNil(t, stuck, "a call that hung answered")
		require.True(t, f.await(5*time.Second))
		if took >= maxSpin {
			long++
		}
		slowest = max(slowest, took)
	}
	assert.LessOrEqual(t, long, trials/4, "%d of %d callers with a timeout of 1ns waited %v or more (slowest %v)", long, trials, maxSpin, slowest)
}
