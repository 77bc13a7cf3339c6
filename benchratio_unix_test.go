//go:build unix

package runtimeguard

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
)

// floorPass is one pass of BenchmarkStatFloor over deps: a stat (or
// lstat) by path of each, and the access(2) call git makes of some.
func floorPass(deps gitread.Deps) {
	var st unix.Stat_t
	for k := range deps {
		if deps[k].NoFollow {
			_ = unix.Lstat(deps[k].Path, &st)
		} else {
			_ = unix.Stat(deps[k].Path, &st)
		}
		if deps[k].Identity {
			_ = unix.Access(deps[k].Path, unix.X_OK)
		}
	}
}

// vsFloor times fn against floorPass over deps, in turns of 64 of each
// within one loop, so that both see the same machine at the same moment
// (figures of separate benchmarks on a shared machine differ by more
// than the bound they are held to). It reports fn's time per call
// (ns/op), the floor's (floor-ns/op), their ratio (x-floor), and the
// same ratio of the process's CPU time (cpu-x-floor): what fn costs the
// machine, counting every thread it keeps busy.
func vsFloor(b *testing.B, deps gitread.Deps, fn func()) {
	const turn = 64
	var wall, floorWall, cpu, floorCPU time.Duration
	b.ResetTimer()
	n := 0
	for n < b.N {
		c0, t0 := processCPU(b), time.Now()
		for j := 0; j < turn; j++ {
			fn()
		}
		c1, t1 := processCPU(b), time.Now()
		for j := 0; j < turn; j++ {
			floorPass(deps)
		}
		c2, t2 := processCPU(b), time.Now()
		wall += t1.Sub(t0)
		floorWall += t2.Sub(t1)
		cpu += c1 - c0
		floorCPU += c2 - c1
		n += turn
	}
	b.StopTimer()
	b.ReportMetric(float64(wall)/float64(n), "ns/op")
	b.ReportMetric(float64(floorWall)/float64(n), "floor-ns/op")
	b.ReportMetric(float64(wall)/float64(floorWall), "x-floor")
	b.ReportMetric(float64(cpu)/float64(floorCPU), "cpu-x-floor")
}

// BenchmarkEnsureCurrentVsFloor is BenchmarkEnsureCurrent (the stat path,
// a check of an unchanged checkout) against BenchmarkStatFloor, the two
// in turns within one loop: x-floor is the bound the stat path is held
// to, taken where both run under the same conditions.
func BenchmarkEnsureCurrentVsFloor(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		g := settledGuard(b, module)
		defer reportChecks(b, g)()
		vsFloor(b, g.bound.Load().snap.Load().deps, func() {
			if err := g.EnsureCurrent(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkStatsVsFloor is the stats of a check of an unchanged checkout
// as the guard makes them (each file's stamp compared), in the caller's
// goroutine, without the hand-off to the binding's worker that bounds a
// check's wait: what the stat path costs beside its floor before that
// bound.
func BenchmarkStatsVsFloor(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		g := settledGuard(b, module)
		deps := g.bound.Load().snap.Load().deps
		c := &readCall{}
		vsFloor(b, deps, func() {
			if !statsUnchanged(c, systemEnv.git, deps) {
				b.Fatal("a file changed")
			}
		})
	})
}
