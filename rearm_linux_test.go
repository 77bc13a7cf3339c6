package runtimeguard

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// rewriteAsCommit replaces the index and the branch's loose ref with
// copies of themselves, each through a lock file renamed over it, as a
// commit replaces them: every file the answer depends on that a commit
// writes is a new inode, and the revision stays where it was.
func rewriteAsCommit(tb testing.TB, dir string) {
	tb.Helper()
	for _, p := range []string{filepath.Join(dir, ".git", "index"), filepath.Join(dir, ".git", "refs", "heads", "main")} {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p+".lock", data, 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(p+".lock", p); err != nil {
			tb.Fatal(err)
		}
	}
}

// firstCheckChanges are the changes BenchmarkFirstCheckAfterChange
// measures the next check after: prepare runs untimed before each, so
// that every change starts from the same state.
var firstCheckChanges = []struct {
	name    string
	prepare func(tb testing.TB, dir string)
	change  func(tb testing.TB, dir string)
}{
	{"commit", func(testing.TB, string) {}, rewriteAsCommit},
	{"pack-refs", func(tb testing.TB, dir string) {
		// The branch loose again, as the next commit leaves it.
		rev := gittest.Git(tb, dir, "rev-parse", "HEAD")
		ref := filepath.Join(dir, ".git", "refs", "heads", "main")
		if err := os.WriteFile(ref+".lock", []byte(rev+"\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(ref+".lock", ref); err != nil {
			tb.Fatal(err)
		}
	}, func(tb testing.TB, dir string) { gittest.Git(tb, dir, "pack-refs", "--all") }},
}

// markSyscalls, set from RUNTIMEGUARD_MARK, makes mark stat a path named
// for its argument: the measured check's system calls lie between two
// such stats in a trace (strace -f) of the benchmark.
var markSyscalls = os.Getenv("RUNTIMEGUARD_MARK") != ""

func mark(what string) {
	if markSyscalls {
		_, _ = os.Lstat("/runtimeguard-mark-" + what)
	}
}

// BenchmarkFirstCheckAfterChange is the first check after a change that
// leaves the revision where it was (files a commit replaces, replaced; the
// refs packed): on the watch path a full read and the re-arming of the
// watches, on the stat path the stats and a full read. Each change is
// made, and the guard brought back to its steady state, untimed.
func BenchmarkFirstCheckAfterChange(b *testing.B) {
	for _, tc := range firstCheckChanges {
		for _, path := range []struct {
			name string
			env  func(testing.TB) *env
		}{{"watch", watchEnv}, {"stat", func(testing.TB) *env { return statEnv() }}} {
			b.Run(tc.name+"/"+path.name, func(b *testing.B) {
				dir := tempDir(b)
				module, _ := agentRepo(b, dir)
				g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(b)}, path.env(b))
				if err != nil {
					b.Fatal(err)
				}
				steady := func() {
					for i := 0; i < 3; i++ {
						if err := g.EnsureCurrent(); err != nil {
							b.Fatal(err)
						}
					}
				}
				steady()
				if (path.name == "watch") != onWatchPath(g) {
					b.Fatalf("not on the %s path: %+v", path.name, g.Observe())
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					tc.prepare(b, dir)
					steady()
					tc.change(b, dir)
					b.StartTimer()
					mark("begin")
					if err := g.EnsureCurrent(); err != nil {
						b.Fatal(err)
					}
					mark("end")
				}
				b.StopTimer()
				steady()
				if (path.name == "watch") != onWatchPath(g) {
					b.Fatalf("left the %s path: %+v", path.name, g.Observe())
				}
			})
		}
	}
}
