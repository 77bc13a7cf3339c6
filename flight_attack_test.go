package runtimeguard

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flightWorkers is how many goroutines serve f: its own count, which
// TestFlightWorkersCounted holds to the goroutines in serve.
func flightWorkers[T any](f *flight[T]) int { return int(f.workers.Load()) }

// waitWorkers waits, for up to 5 s, until no worker of f lives, and
// returns how many do.
func waitWorkers[T any](f *flight[T]) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		w := flightWorkers(f)
		if w == 0 || time.Now().After(deadline) {
			return w
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Workers ended as they look, beside new ones that serve, all end once
// calls stop: none is left parked on a flight that has no worker, and no
// two serve one flight for long.
func TestFlightAttackNoWorkerOutlivesCalls(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	f := flight[int64]{idle: 30 * time.Microsecond}
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 11))
			for i := 0; i < 3000; i++ {
				_, stuck := f.do(10*time.Second, func(c *call[int64]) { c.val = mono() })
				if !assert.Nil(t, stuck, "call %d", i) {
					return
				}
				spinFor(time.Duration(rng.IntN(int(3 * spinMax))))
			}
		}(g)
	}
	wg.Wait()
	assert.Zero(t, waitWorkers(&f), "workers live long after calls stopped")
	f.mu.Lock()
	assert.False(t, f.worker, "the flight says a worker lives")
	f.mu.Unlock()
	// And the flight still answers.
	c, stuck := f.do(5*time.Second, func(c *call[int64]) { c.val = 7 })
	require.Nil(t, stuck)
	assert.Equal(t, int64(7), c.val)
}

// A call whose work ends its goroutine (runtime.Goexit, as t.FailNow does,
// rather than return or panic) answers its callers, and leaves the flight
// able to answer the next: the worker it ended is replaced, rather than
// leaving later calls in work for a worker that is gone.
func TestFlightAttackCallEndsItsGoroutine(t *testing.T) {
	for _, procs := range []int{1, 4} {
		for _, idle := range []time.Duration{time.Nanosecond, time.Hour} {
			t.Run(fmt.Sprint("GOMAXPROCS=", procs, "/idle=", idle), func(t *testing.T) {
				callEndsItsGoroutine(t, procs, idle)
			})
		}
	}
}

// callEndsItsGoroutine makes calls, every fifth of which ends its
// goroutine, on a flight with idle interval idle, with GOMAXPROCS procs;
// once calls stop, the flight's workers end with the interval.
func callEndsItsGoroutine(t *testing.T, procs int, idle time.Duration) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	f := flight[int]{idle: idle}
	for i := 0; i < 200; i++ {
		c, stuck := f.do(2*time.Second, func(c *call[int]) {
			c.val = i
			if i%5 == 2 {
				runtime.Goexit()
			}
		})
		require.Nil(t, stuck, "call %d", i)
		if i%5 != 2 {
			require.Equal(t, i, c.val)
		}
		spinFor(time.Duration(i%7) * 5 * time.Microsecond)
	}
	if idle < time.Second {
		assert.Zero(t, waitWorkers(&f), "workers live long after calls stopped")
	} else {
		assert.Equal(t, 1, flightWorkers(&f), "workers of a flight whose calls go on")
	}
}

// Calls go on while GOMAXPROCS changes under the worker, between one and
// several processors (where a worker looks for calls, and where it must
// not): each is answered by a call that began after its caller arrived.
func TestFlightAttackGOMAXPROCSChanges(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	f := flight[int64]{idle: time.Hour}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p := 0; ; p++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Microsecond):
				runtime.GOMAXPROCS(1 + p%4)
			}
		}
	}()
	errs := make(chan error, 2)
	for g := 0; g < 2; g++ {
		go func(g int) { errs <- answeredCalls(&f, uint64(g)+100, 4000) }(g)
	}
	for g := 0; g < 2; g++ {
		assert.NoError(t, <-errs)
	}
	close(stop)
	wg.Wait()
}

// servingGoroutines is how many goroutines of the process are in a
// flight's serve or replace.
func servingGoroutines() int {
	stacks := string(allStacks())
	return strings.Count(stacks, ").serve(") + strings.Count(stacks, ").replace(")
}

// A flight's count of its workers is the goroutines that serve it: one
// per flight while calls come, none once they ended, also where calls
// ended the worker's goroutine.
func TestFlightWorkersCounted(t *testing.T) {
	var fs [3]flight[int]
	for i := range fs {
		fs[i].idle = 20 * time.Millisecond
		for j := 0; j < 10; j++ {
			_, stuck := fs[i].do(time.Second, func(c *call[int]) {
				if j == 4 {
					runtime.Goexit()
				}
				c.val = j
			})
			require.Nil(t, stuck)
		}
	}
	for i := range fs {
		assert.Equal(t, 1, flightWorkers(&fs[i]), "flight %d", i)
	}
	// Other tests' workers may end meanwhile: these three serve.
	assert.GreaterOrEqual(t, servingGoroutines(), 3, "goroutines in serve")
	for i := range fs {
		assert.Zero(t, waitWorkers(&fs[i]), "flight %d", i)
	}
}
