//go:build unix

package runtimeguard

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// processCPU is the CPU time the process has used so far.
func processCPU(t testing.TB) time.Duration {
	var ru unix.Rusage
	require.NoError(t, unix.Getrusage(unix.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A flight whose calls stopped costs no CPU: its worker looked for the
// next call for a moment at most, then parked.
func TestFlightIdleWorkerCostsNoCPU(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	f := flight[int]{idle: time.Hour}
	for i := 0; i < 5000; i++ {
		_, stuck := f.do(5*time.Second, func(c *call[int]) { c.val = i })
		require.Nil(t, stuck)
	}
	time.Sleep(20 * time.Millisecond)
	before := processCPU(t)
	time.Sleep(200 * time.Millisecond)
	used := processCPU(t) - before
	assert.Less(t, used, 50*time.Millisecond, "the process used %v of CPU in 200 ms with no call", used)
}
