package runtimeguard

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// A herd of goroutines checking an unchanged checkout stays on the watch
// path: none of its checks reads the checkout for want of an epoll set to
// poll, however many more goroutines than sets there are, and however
// often the threads polling are preempted (GOMAXPROCS above the cores
// makes the kernel preempt them around their epoll_wait).
//
// The herd runs in a process of its own, whose watcher no other test's
// subscriptions, mounts or leftover work share: the claim is about a
// process whose checkouts do not change.
func TestWatchHerdDoesNoFullRead(t *testing.T) {
	if os.Getenv(herdChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWatchHerdDoesNoFullRead$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), herdChild+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("the herd's process:\n%s", out)
		require.NoError(t, err, "the herd's process failed")
		return
	}
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	steady(t, g, reads)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4 * runtime.NumCPU()))

	const goroutines, checks = 128, 1500
	// A first herd polls every epoll set, each of which reports a change
	// of the mount table made before it once; then a herd during which
	// the table changed again is run again (see mountsStill).
	herd(t, g, goroutines, 50)
	steady(t, g, reads)
	mountsStill(t, func(c *gittest.Trial) {
		before := reads.Load()
		herd(t, g, goroutines, checks)
		assert.Zero(c, reads.Load()-before, "full reads during %d checks of an unchanged checkout from %d goroutines", goroutines*checks, goroutines)
		steady(t, g, reads)
	})
	assert.True(t, onWatchPath(g))
}

// herdChild is set in the environment of the herd's own process.
const herdChild = "RUNTIMEGUARD_TEST_HERD_CHILD"

// herd checks g from goroutines goroutines, checks times each.
func herd(t *testing.T, g *Guard, goroutines, checks int) {
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for i := 0; i < goroutines; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < checks; k++ {
				if err := g.EnsureCurrent(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// steady checks g until a check reads nothing: files written within the
// file system's timestamp granularity are read again until they are old
// enough to trust, and a herd is measured from the steady state after.
func steady(t testing.TB, g *Guard, reads *atomic.Int64) {
	t.Helper()
	for i := 0; i < 100; i++ {
		before := reads.Load()
		require.NoError(t, g.EnsureCurrent())
		if reads.Load() == before {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the checkout never settled: every check reads it")
}

// BenchmarkEnsureCurrentWatchHerd is a check of an unchanged checkout on
// the watch path from 2, 16 and 128 goroutines per GOMAXPROCS (the
// process has 2×GOMAXPROCS epoll sets, at least 4 and at most 64). It
// reports the full reads per check: a check that found no free set to
// poll reads the checkout instead.
func BenchmarkEnsureCurrentWatchHerd(b *testing.B) {
	module := benchSetup(b).modules["loose"]
	for _, par := range []int{2, 16, 128} {
		b.Run(fmt.Sprintf("goroutines=%dxGOMAXPROCS", par), func(b *testing.B) {
			e, reads := countingEnv(b)
			g := watchedGuardIn(b, module, e)
			steady(b, g, reads)
			b.Logf("GOMAXPROCS %d, %d CPUs", runtime.GOMAXPROCS(0), runtime.NumCPU())
			before := reads.Load()
			b.SetParallelism(par)
			benchChecksParallel(b, g)
			b.ReportMetric(float64(reads.Load()-before)/float64(b.N), "fullreads/op")
		})
	}
}
