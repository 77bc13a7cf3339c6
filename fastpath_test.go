package runtimeguard

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// settledEnv is the system environment with a clock an hour ahead, so every
// stamp is old enough to trust and the checks below exercise the fast path.
func settledEnv() *env {
	e := statEnv()
	e.now = func() time.Time { return time.Now().Add(time.Hour) }
	return e
}

// statEnv is the system environment on the stat path: no inotify watch.
func statEnv() *env {
	e := testEnv(nil)
	e.watch = func() (*watch.Watcher, error) { return nil, errors.New("the watch path is off in this test") }
	return e
}

// watchEnv is the system environment on the watch path, where the
// platform has one.
func watchEnv(t testing.TB) *env {
	t.Helper()
	if _, err := watch.Shared(); err != nil {
		t.Skipf("no watch path here: %v", err)
	}
	return testEnv(nil)
}

// onWatchPath reports whether the guard's checks of an unchanged checkout
// take the watch path.
func onWatchPath(g *Guard) bool {
	check, _ := g.bound.Load().checkPath()
	return check == checkWatch
}

// pathModes are the ways a check proves a checkout unchanged, each with
// the environment that takes it: the stat path with a settled clock (the
// fast path) and the real one (files too recent: reads), and the watch
// path.
var pathModes = []struct {
	name string
	env  func(t testing.TB) *env
}{
	{"stat-settled", func(testing.TB) *env { return settledEnv() }},
	{"stat-real", func(testing.TB) *env { return statEnv() }},
	{"watch", watchEnv},
}

// bindFast binds a guard to module with env e and makes sure its snapshot
// is trusted when e's clock says the files settled.
func bindFast(t *testing.T, module string, e *env) *Guard {
	t.Helper()
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	return g
}

func trusted(g *Guard) bool {
	s := g.bound.Load().snap.Load()
	return s != nil && s.Trusted
}

// Every change is seen by the next check, whether the check takes the fast
// path (a settled clock) or reads again (the real clock, files too recent).
func TestNextCheckTellsTheTruth(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, dir, first string)
		stale  bool
	}{
		{"commit", func(t *testing.T, dir, _ string) { commit(t, dir, "run_agent.py", "x = 2\n") }, true},
		{"commit --amend", func(t *testing.T, dir, _ string) {
			git(t, dir, "commit", "-q", "--amend", "-m", "amended")
		}, true},
		{"reset --hard to another commit", func(t *testing.T, dir, first string) {
			git(t, dir, "reset", "-q", "--hard", first)
		}, true},
		{"checkout of another branch at another commit", func(t *testing.T, dir, first string) {
			git(t, dir, "checkout", "-q", "-b", "older", first)
		}, true},
		{"checkout of another branch at the same commit", func(t *testing.T, dir, _ string) {
			git(t, dir, "checkout", "-q", "-b", "same")
		}, false},
		{"detach at the same commit", func(t *testing.T, dir, _ string) {
			git(t, dir, "checkout", "-q", "--detach")
		}, false},
		{"gc", func(t *testing.T, dir, _ string) { git(t, dir, "gc", "-q", "--prune=now") }, false},
		{"pack-refs --all", func(t *testing.T, dir, _ string) { git(t, dir, "pack-refs", "--all") }, false},
		{"creation of other refs", func(t *testing.T, dir, first string) {
			git(t, dir, "branch", "topic", first)
			git(t, dir, "tag", "v1")
			git(t, dir, "update-ref", "refs/remotes/origin/main", first)
		}, false},
		{"fetch", func(t *testing.T, dir, _ string) {
			other := filepath.Join(tempDir(t), "other")
			agentRepo(t, other)
			commit(t, other, "run_agent.py", "upstream\n")
			git(t, dir, "fetch", "-q", other, "main:refs/remotes/other/main")
		}, false},
		{"status rewrites the index", func(t *testing.T, dir, _ string) {
			index := filepath.Join(dir, ".git", "index")
			before, err := os.Stat(index)
			require.NoError(t, err)
			// An old timestamp on the module makes its cached stat data
			// outdated, so status refreshes and rewrites the index.
			old := time.Now().Add(-time.Hour)
			require.NoError(t, os.Chtimes(filepath.Join(dir, "run_agent.py"), old, old))
			git(t, dir, "status", "--porcelain")
			after, err := os.Stat(index)
			require.NoError(t, err)
			require.False(t, os.SameFile(before, after) && before.ModTime().Equal(after.ModTime()), "status did not rewrite the index")
		}, false},
		{"rm --cached of the module", func(t *testing.T, dir, _ string) {
			git(t, dir, "rm", "-q", "--cached", "run_agent.py")
		}, true},
		{"module file deleted", func(t *testing.T, dir, _ string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "run_agent.py")))
		}, false},
		// The configured path leads to another module file: a full read
		// says so, and so must every path's check.
		{"module file replaced by a link to another checkout's", func(t *testing.T, dir, _ string) {
			other := filepath.Join(tempDir(t), "other")
			agentRepo(t, other)
			replaceByLink(t, filepath.Join(dir, "run_agent.py"), filepath.Join(other, "run_agent.py"))
		}, true},
		{"module file replaced by a link to another file of the checkout", func(t *testing.T, dir, _ string) {
			replaceByLink(t, filepath.Join(dir, "run_agent.py"), "lib.py")
		}, true},
		{"module file replaced by another file (rename over it)", func(t *testing.T, dir, _ string) {
			p := filepath.Join(dir, "run_agent.py.new")
			require.NoError(t, os.WriteFile(p, []byte("x = 1\n"), 0o644))
			require.NoError(t, os.Rename(p, filepath.Join(dir, "run_agent.py")))
		}, false},
	}
	for mi, mode := range pathModes {
		for ci, tc := range cases {
			if !onPath(ci, mi, len(pathModes)) {
				continue
			}
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				dir := tempDir(t)
				first := initRepo(t, dir, map[string]string{"run_agent.py": "x = 1\n", "lib.py": "y\n"})
				module := filepath.Join(dir, "run_agent.py")
				commit(t, dir, "lib.py", "y = 2\n")
				g := bindFast(t, module, mode.env(t))
				switch mode.name {
				case "stat-settled":
					require.True(t, trusted(g), "the snapshot of a settled checkout is trusted")
				case "watch":
					require.NoError(t, g.EnsureCurrent())
					require.True(t, onWatchPath(g), "a checkout on a local file system is watched")
				}
				require.NoError(t, g.EnsureCurrent())

				tc.change(t, dir, first)
				err := g.EnsureCurrent()
				if tc.stale {
					assert.ErrorIs(t, err, ErrStale)
				} else {
					assert.NoError(t, err)
				}
				// And the check after that agrees.
				assert.Equal(t, err == nil, g.EnsureCurrent() == nil)
			})
		}
	}
}

// frozenStamps is the file system with each path's first stamp (by stat
// or by lstat) returned for good: stamps that cannot see an in-place
// rewrite within one timestamp tick. Files are read whole.
func frozenStamps() *gitread.FS {
	frozen := map[string]fsread.Stamp{}
	var mu sync.Mutex
	freeze := func(stat func(string) (fsread.Stamp, error), follow string) func(string) (fsread.Stamp, error) {
		return func(p string) (fsread.Stamp, error) {
			mu.Lock()
			defer mu.Unlock()
			if st, ok := frozen[follow+p]; ok {
				return st, nil
			}
			st, err := stat(p)
			frozen[follow+p] = st
			return st, err
		}
	}
	return &gitread.FS{
		Stat:     freeze(fsread.StatStamp, "stat "),
		Lstat:    freeze(fsread.LstatStamp, "lstat "),
		ReadFile: fsread.ReadRegular,
	}
}

// replaceByLink puts a symbolic link to target at path, by a rename over
// what is there (as a deploy flips a link).
func replaceByLink(t *testing.T, path, target string) {
	t.Helper()
	tmp := path + ".link"
	require.NoError(t, os.Symlink(target, tmp))
	require.NoError(t, os.Rename(tmp, path))
}

// A ref rewritten in place, with the same length, in the same timestamp tick
// as the read keeps every stamp the same. The racy rule must distrust it.
func TestSameTickInPlaceRewriteIsSeen(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	second := commit(t, dir, "run_agent.py", "x = 2\n")
	third := commit(t, dir, "run_agent.py", "x = 3\n")
	ref := filepath.Join(dir, ".git", "refs", "heads", "main")
	writeFile(t, ref, second+"\n")

	// The clock reads the moment the ref was written: the read happens in
	// the same tick.
	fi, err := os.Stat(ref)
	require.NoError(t, err)
	e := testEnv(nil)
	e.now = fi.ModTime
	e.git = frozenStamps() // stamps that cannot see an in-place rewrite within one tick
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	require.Equal(t, second, g.Identity().Revision)
	require.False(t, trusted(g), "a ref written in the tick of its read is trusted")

	f, err := os.OpenFile(ref, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte(third), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, third, se.Current)
}

// A symbolic link in the configured module path swapped to another checkout
// makes the runtime stale: the code the server would load next is there.
func TestSwappedLinkToCheckoutIsStale(t *testing.T) {
	tmp := tempDir(t)
	v1, v2 := filepath.Join(tmp, "releases", "v1"), filepath.Join(tmp, "releases", "v2")
	agentRepo(t, v1)
	agentRepo(t, v2)
	current := filepath.Join(tmp, "current")
	require.NoError(t, os.Symlink(v1, current))
	g := bindFast(t, filepath.Join(current, "run_agent.py"), settledEnv())
	assert.Equal(t, resolved(t, v1), g.Identity().SourceDir)
	require.NoError(t, g.EnsureCurrent())

	next := filepath.Join(tmp, "next")
	require.NoError(t, os.Symlink(v2, next))
	require.NoError(t, os.Rename(next, current))
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Empty(t, se.Current)
	assert.ErrorIs(t, se, errElsewhere)
}

// With Options.Check "read" no snapshot is trusted: every check reads.
func TestCheckReadNeverTrusts(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir, Check: "read"}, settledEnv())
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	assert.False(t, trusted(g))
}

// One goroutine commits while eight check: every check that begins after a
// commit returned fails, and no check fails before the first commit began.
func TestChecksRaceCommits(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel() // a repository and a guard of its own
			checksRaceCommits(t, mode.env(t))
		})
	}
}

func checksRaceCommits(t *testing.T, e *env) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir}, e)
	require.NoError(t, err)

	var commitsStarted, commitsDone atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var checks, failures atomic.Int64
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				done := commitsDone.Load()
				err := g.EnsureCurrent()
				started := commitsStarted.Load()
				checks.Add(1)
				if done > 0 && err == nil {
					t.Errorf("a check that began after commit %d returned passed", done)
					return
				}
				if err != nil {
					failures.Add(1)
					if started == 0 {
						t.Errorf("a check failed before any commit began: %v", err)
						return
					}
				}
			}
		}()
	}
	for i := 0; i < 10; i++ {
		commitsStarted.Add(1)
		commit(t, dir, "run_agent.py", "x = "+string(rune('a'+i))+"\n")
		commitsDone.Add(1)
	}
	close(stop)
	wg.Wait()
	assert.Positive(t, failures.Load())
	t.Logf("%d checks, %d stale", checks.Load(), failures.Load())
}

// A module file that is itself a link binds to the checkout it leads to.
func TestLinkedModuleFileBindsToItsTarget(t *testing.T) {
	tmp := tempDir(t)
	checkout := filepath.Join(tmp, "agent")
	target, rev := agentRepo(t, checkout)
	app := filepath.Join(tmp, "app")
	require.NoError(t, os.MkdirAll(app, 0o755))
	link := filepath.Join(app, "run_agent.py")
	require.NoError(t, os.Symlink(target, link))

	g := bindFast(t, link, settledEnv())
	assert.Equal(t, Identity{SourceDir: resolved(t, checkout), ModulePath: resolved(t, target), Revision: rev}, g.Identity())
	require.True(t, trusted(g))
	require.NoError(t, g.EnsureCurrent())
	commit(t, checkout, "run_agent.py", "x = 2\n")
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
}
