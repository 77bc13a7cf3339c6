package runtimeguard

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flightWorkers is how many goroutines of the process are a flight's
// worker (in serve).
func flightWorkers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte(").serve("))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitWorkers waits, for up to 5 s, until no more than n flight workers
// live, and returns how many do.
func waitWorkers(n int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		w := flightWorkers()
		if w <= n || time.Now().After(deadline) {
			return w
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Workers ended as they look, beside new ones that serve, all end once
// calls stop: none is left parked on a flight that has no worker, and no
// two serve one flight for long.
func TestFlightAttackNoWorkerOutlivesCalls(t *testing.T) {
	require.Zero(t, waitWorkers(0), "a worker of another test still lives")
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
	assert.Zero(t, waitWorkers(0), "workers live long after calls stopped")
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
		t.Run(fmt.Sprint("GOMAXPROCS=", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			f := flight[int]{idle: time.Hour}
			for i := 0; i < 50; i++ {
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
			}
		})
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
		go func(g int) {
			var err error
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := 0; i < 4000 && err == nil; i++ {
				arrived := mono()
				c, stuck := f.do(10*time.Second, func(c *call[int64]) { c.val = mono() })
				switch {
				case stuck != nil:
					err = fmt.Errorf("call %d: stuck on %q after %v", i, stuck.at, stuck.since)
				case c.val < arrived:
					err = fmt.Errorf("call %d: answered by a call that began before its caller arrived", i)
				}
				spinFor(time.Duration(rng.IntN(int(2 * spinMax))))
			}
			errs <- err
		}(g)
	}
	for g := 0; g < 2; g++ {
		assert.NoError(t, <-errs)
	}
	close(stop)
	wg.Wait()
}
