//go:build unix

package runtimeguard

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// busyProcessors keeps every processor but one busy with work of its own
// (as a server under load keeps them) until the returned stop is called:
// a goroutine made runnable then finds no idle processor, and the
// scheduler wakes no thread to run it.
func busyProcessors(b *testing.B) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	n := runtime.GOMAXPROCS(0) - 1
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(1)
			for !done.Load() {
				for j := 0; j < 1000; j++ {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			_ = x
		}()
	}
	b.Logf("%d of %d processors kept busy", n, runtime.GOMAXPROCS(0))
	return func() { done.Store(true); wg.Wait() }
}

// BenchmarkEnsureCurrentBusy is BenchmarkEnsureCurrent (the stat path)
// with every other processor busy: the cost of the bound's hand-off to
// the binding's worker where no idle processor is woken for it.
func BenchmarkEnsureCurrentBusy(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		g := settledGuard(b, module)
		defer busyProcessors(b)()
		benchChecks(b, g)
	})
}

// BenchmarkStatFloorBusy is BenchmarkStatFloor beside the same busy
// processors: the floor of BenchmarkEnsureCurrentBusy.
func BenchmarkStatFloorBusy(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		deps := settledGuard(b, module).bound.Load().snap.Load().deps
		defer busyProcessors(b)()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			floorPass(deps)
		}
	})
}

// BenchmarkEnsureCurrentVsFloorBusy is BenchmarkEnsureCurrentVsFloor with
// every other processor busy.
func BenchmarkEnsureCurrentVsFloorBusy(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		g := settledGuard(b, module)
		defer reportChecks(b, g)()
		defer busyProcessors(b)()
		vsFloor(b, g.bound.Load().snap.Load().deps, func() {
			if err := g.EnsureCurrent(); err != nil {
				b.Fatal(err)
			}
		})
	})
}
