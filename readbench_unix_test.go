//go:build unix

package runtimeguard

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// readBenchDirs are the checkouts of BenchmarkReadAfterChange, one per
// size, made once per run (the largest takes a while) in a directory
// TestMain removes.
var (
	readBenchMu   sync.Mutex
	readBenchRoot string
	readBenchDirs = map[int]string{}
)

// readBenchCheckout returns a checkout of files tracked files (and ten
// packed tags), made on the first call for that size.
func readBenchCheckout(b *testing.B, files int) string {
	b.Helper()
	readBenchMu.Lock()
	defer readBenchMu.Unlock()
	if dir, ok := readBenchDirs[files]; ok {
		return dir
	}
	if readBenchRoot == "" {
		root, err := os.MkdirTemp("", "runtimeguard-readbench-")
		if err != nil {
			b.Fatal(err)
		}
		cleanups = append(cleanups, root)
		readBenchRoot = root
	}
	dir := filepath.Join(readBenchRoot, fmt.Sprint(files))
	makeCheckout(b, dir, files, 10)
	readBenchDirs[files] = dir
	return dir
}

// BenchmarkReadAfterChange is the guard's check after a change, which
// reads the checkout again (on the stat path, its files settled, so that
// every change is seen by a stat; the handoff to the reading goroutine
// included), at 1,000, 100,000 and 500,000 tracked files (the largest
// not under -short):
//
//   - ref-only: packed-refs rewritten with the same content (a new file,
//     as pack-refs writes it): HEAD's revision and the index unchanged;
//   - index: the index's timestamps changed (as a refresh that rewrites
//     it leaves it), its content the same: it is read whole;
//   - git: git rev-parse HEAD and git ls-files --error-unmatch of the
//     module on the same checkout, the answer from git, in two processes.
//
// Beside time and allocations it reports heap-peak-B, the bytes one check
// allocates with the collector off (so the most its heap can grow by
// while it reads), index-B, the size of the index, and for git,
// git-maxrss-KB, the larger resident peak of its two processes.
func BenchmarkReadAfterChange(b *testing.B) {
	for _, files := range []int{1000, 100000, 500000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			if files > 100000 && testing.Short() {
				b.Skip("the largest checkout is not made under -short")
			}
			dir := readBenchCheckout(b, files)
			module := filepath.Join(dir, "run_agent.py")
			index := filepath.Join(dir, ".git", "index")
			packed := filepath.Join(dir, ".git", "packed-refs")
			fi, err := os.Stat(index)
			if err != nil {
				b.Fatal(err)
			}
			refOnly := func(i int) {
				data, err := os.ReadFile(packed)
				if err != nil {
					b.Fatal(err)
				}
				writeFile(b, packed+".new", string(data))
				if err := os.Rename(packed+".new", packed); err != nil {
					b.Fatal(err)
				}
			}
			base := time.Now().Add(-time.Hour)
			indexChange := func(i int) {
				at := base.Add(time.Duration(i+1) * time.Millisecond)
				if err := os.Chtimes(index, at, at); err != nil {
					b.Fatal(err)
				}
			}
			for _, tc := range []struct {
				name   string
				change func(i int)
			}{{"ref-only", refOnly}, {"index", indexChange}} {
				b.Run(tc.name, func(b *testing.B) {
					g := settledGuard(b, module)
					check := func(i int) {
						tc.change(i)
						if err := g.EnsureCurrent(); err != nil {
							b.Fatal(err)
						}
					}
					check(-1) // the first read after binding
					reads := g.Stats().FullReads
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						tc.change(i)
						b.StartTimer()
						if err := g.EnsureCurrent(); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					if got := g.Stats().FullReads - reads; got != uint64(b.N) {
						b.Fatalf("%d checks made %d full reads", b.N, got)
					}
					b.ReportMetric(float64(heapPeak(func() { check(b.N) })), "heap-peak-B")
					b.ReportMetric(float64(fi.Size()), "index-B")
				})
			}
			b.Run("git", func(b *testing.B) {
				var rss int64
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					for _, args := range [][]string{
						{"rev-parse", "--verify", "HEAD"},
						{"--literal-pathspecs", "ls-files", "--error-unmatch", "--", "run_agent.py"},
					} {
						cmd := gittest.Command(dir, args...)
						if out, err := cmd.CombinedOutput(); err != nil {
							b.Fatalf("git %v: %v: %s", args, err, out)
						}
						if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
							rss = max(rss, int64(ru.Maxrss))
						}
					}
				}
				if runtime.GOOS == "linux" { // ru_maxrss in KiB
					b.ReportMetric(float64(rss), "git-maxrss-KB")
				}
				b.ReportMetric(float64(fi.Size()), "index-B")
			})
		})
	}
}

// heapPeak runs fn with the collector off and returns the bytes it
// allocated: nothing is freed meanwhile, so it is the most the heap can
// have grown by at any moment of fn.
func heapPeak(fn func()) uint64 {
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
