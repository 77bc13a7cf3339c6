//go:build unix

package runtimeguard

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func BenchmarkRatio(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		g := settledGuard(b, module)
		deps := g.bound.Load().snap.Load().deps
		var st unix.Stat_t
		var tg, tf time.Duration
		const batch = 64
		b.ResetTimer()
		for i := 0; i < b.N; i += batch {
			t0 := time.Now()
			for j := 0; j < batch; j++ {
				if err := g.EnsureCurrent(); err != nil {
					b.Fatal(err)
				}
			}
			t1 := time.Now()
			for j := 0; j < batch; j++ {
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
			tf += time.Since(t1)
			tg += t1.Sub(t0)
		}
		b.ReportMetric(float64(tg)/float64(tf), "x-floor")
	})
}

// BenchmarkRatioLogic: the guard's stats logic inline, against the floor.
func BenchmarkRatioLogic(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		g := settledGuard(b, module)
		deps := g.bound.Load().snap.Load().deps
		var st unix.Stat_t
		var tg, tf time.Duration
		const batch = 64
		c := &readCall{}
		fs := systemEnv.git
		b.ResetTimer()
		for i := 0; i < b.N; i += batch {
			t0 := time.Now()
			for j := 0; j < batch; j++ {
				if !statsUnchanged(c, fs, deps) {
					b.Fatal("changed")
				}
			}
			t1 := time.Now()
			for j := 0; j < batch; j++ {
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
			tf += time.Since(t1)
			tg += t1.Sub(t0)
		}
		b.ReportMetric(float64(tg)/float64(tf), "x-floor")
	})
}
