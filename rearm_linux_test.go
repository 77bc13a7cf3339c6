package runtimeguard

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/watch"
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

// rearmCalls makes change on a watched checkout whose revision it keeps,
// and returns the system calls the subscription's arming made in the
// first check after it, and in all the checks until the guard is back on
// the watch path with nothing to read.
func rearmCalls(t *testing.T, change func(t testing.TB, dir string)) (first, all watch.Calls) {
	since := func(a, b watch.Calls) watch.Calls {
		return watch.Calls{Statfs: a.Statfs - b.Statfs, AddWatch: a.AddWatch - b.AddWatch, RmWatch: a.RmWatch - b.RmWatch}
	}
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	steady(t, g, reads)
	sub := g.bound.Load().sub.Load()
	before := sub.Calls()
	change(t, dir)
	require.NoError(t, g.EnsureCurrent())
	first = since(sub.Calls(), before)
	steady(t, g, reads)
	require.True(t, onWatchPath(g))
	return first, since(sub.Calls(), before)
}

// Re-arming after a change adds again only the watches whose path now
// leads elsewhere: after a commit's files are replaced, the index and the
// loose ref (new files, each watched itself); after git pack-refs, the new
// packed-refs (and once more at the read after it: its name was not
// watched before, so a move of it until then is not known). Every
// directory watched keeps its watch. (A change of the mount table makes
// every watch be added again, rightly: see mountsStill.)
func TestRearmKeepsWhatDidNotMove(t *testing.T) {
	for _, tc := range []struct {
		name       string
		change     func(t testing.TB, dir string)
		first, all uint64
	}{
		{"commit", rewriteAsCommit, 2, 2},
		{"pack-refs", func(t testing.TB, dir string) { gittest.Git(t, dir, "pack-refs", "--all") }, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mountsStill(t, func(c *gittest.Trial) {
				first, all := rearmCalls(t, tc.change)
				t.Logf("the first check: %+v; until steady: %+v", first, all)
				assert.Equal(c, tc.first, first.AddWatch, "inotify_add_watch calls of the first check")
				assert.Equal(c, tc.first, first.Statfs, "statfs calls of the first check")
				assert.Equal(c, tc.all, all.AddWatch, "inotify_add_watch calls until steady")
				assert.Equal(c, tc.all, all.Statfs, "statfs calls until steady")
			})
		})
	}
}

// A link on the configured path re-pointed between two checks is followed:
// the check after it watches the new route, so that a link on it
// re-pointed next makes the guard stale.
func TestRearmFollowsARetargetedLink(t *testing.T) {
	dir := tempDir(t)
	repo, other := filepath.Join(dir, "repo"), filepath.Join(dir, "other")
	agentRepo(t, repo)
	agentRepo(t, other)
	current, alias := filepath.Join(dir, "current"), filepath.Join(dir, "alias")
	require.NoError(t, os.Symlink(repo, current))
	require.NoError(t, os.Symlink(repo, alias))
	e, reads := countingEnv(t)
	g := watched(t, filepath.Join(current, "run_agent.py"), e)
	steady(t, g, reads)

	relink(t, current, alias) // the same module, through one more link
	require.NoError(t, g.EnsureCurrent())
	steady(t, g, reads)
	require.True(t, onWatchPath(g))

	relink(t, alias, other)
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se, "the link on the new route re-pointed to another checkout")
	assert.ErrorIs(t, se, errElsewhere)
}

// A directory on the way replaced by a copy of itself (the same path, the
// same files' content, another directory) is watched anew: a ref written
// in the copy next makes the guard stale.
func TestRearmWatchesAReplacedDirectory(t *testing.T) {
	dir := tempDir(t)
	module, first := agentRepo(t, dir)
	second := commit(t, dir, "lib.py", "x = 2\n")
	writeRef(t, dir, first)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	steady(t, g, reads)

	heads := filepath.Join(dir, ".git", "refs", "heads")
	copyDir := heads + ".new"
	require.NoError(t, os.Mkdir(copyDir, 0o755))
	data, err := os.ReadFile(filepath.Join(heads, "main"))
	require.NoError(t, err)
	writeFile(t, filepath.Join(copyDir, "main"), string(data))
	require.NoError(t, os.Rename(heads, heads+".old"))
	require.NoError(t, os.Rename(copyDir, heads))
	require.NoError(t, g.EnsureCurrent(), "the same revision")
	steady(t, g, reads)
	require.True(t, onWatchPath(g))

	writeRef(t, dir, second)
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se, "a ref written in the directory that replaced refs/heads")
	assert.Equal(t, second, se.Current)
}
