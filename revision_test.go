package runtimeguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// statEnvOn is statEnv reading the checkout through fs.
func statEnvOn(fs *gitread.FS) *env {
	e := statEnv()
	e.git = fs
	return e
}

// boundBinding binds a new binding to the checkout of module, as a
// guard's bind does, with the options opts on e, and returns it with its
// counters.
func boundBinding(t *testing.T, opts Options, e *env, module string) (*binding, *counters) {
	t.Helper()
	cfg, err := opts.resolveOn(e)
	require.NoError(t, err)
	abs, err := gitread.Abs(module)
	require.NoError(t, err)
	counts := new(counters)
	b := newBinding(cfg, abs, time.Now(), nil, counts)
	t.Cleanup(b.close)
	call, err := b.look(context.Background(), time.Minute, true)
	require.NoError(t, err)
	require.NoError(t, call.Val.Err)
	c := call.Val.Checkout
	b.id = Identity{SourceDir: c.SourceDir, ModulePath: c.ModulePath, Revision: c.Revision}
	b.boundTo(&c)
	return b, counts
}

// A binding answers with the checkout's revision, from its snapshot while
// a stat of each file finds it unchanged, and reads again once HEAD moved;
// off the watch path it says why.
func TestBindingFollowsHEAD(t *testing.T) {
	gittest.Need(t)
	dir := gittest.TempDir(t)
	module, rev := gittest.Agent(t, dir)
	b, counts := boundBinding(t, Options{HomeDir: dir}, statEnv(), module)
	require.NotNil(t, b.snap.Load())
	assert.Equal(t, rev, b.snap.Load().Rev)
	assert.Equal(t, uint64(1), counts.fullReads.Load())

	got, err := b.current(time.Minute)
	require.NoError(t, err)
	assert.Equal(t, rev, got)
	mode, why := b.checkPath()
	assert.Equal(t, checkStat, mode)
	assert.Equal(t, "the watch path is off in this test", why)
	read, _ := boundBinding(t, Options{HomeDir: dir, Check: "read"}, statEnv(), module)
	mode, _ = read.checkPath()
	assert.Equal(t, checkRead, mode)

	next := gittest.Commit(t, dir, "other.txt", "x\n")
	require.NotEqual(t, rev, next)
	got, err = b.current(time.Minute)
	require.NoError(t, err)
	assert.Equal(t, next, got)
	for _, resolve := range []bool{false, true} {
		assert.Equal(t, []string{filepath.Dir(gittest.Resolved(t, module))}, b.installDirs(resolve))
	}
}

// A look that its caller gave up on answers with an error matching
// ErrReadTimeout, naming what the executor is blocked on, and is counted;
// a read that panics answers with a *PanicError.
func TestBindingErrorsInThePackagesWords(t *testing.T) {
	gittest.Need(t)
	dir := gittest.TempDir(t)
	module, _ := gittest.Agent(t, dir)
	fs := *gitread.System
	var boom atomic.Bool
	fs.Stat = func(p string) (fsread.Stamp, error) {
		if boom.Load() {
			panic("the stat broke")
		}
		return gitread.System.Stat(p)
	}
	b, counts := boundBinding(t, Options{HomeDir: dir}, statEnvOn(&fs), module)

	release := make(chan struct{})
	running := make(chan struct{})
	held := "/held"
	go func() {
		_, _ = bounded.Submit(context.Background(), b.x, nil, time.Hour, func(t *bounded.Task[int]) {
			t.At.Store(&held)
			close(running)
			<-release
		}, nil)
	}()
	<-running
	_, err := b.current(10 * time.Millisecond)
	close(release)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrReadTimeout)
	assert.Contains(t, err.Error(), "a look at "+b.configured)
	assert.Contains(t, err.Error(), ", blocked on /held")
	assert.Equal(t, uint64(1), counts.readTimeouts.Load())

	read, _ := boundBinding(t, Options{HomeDir: dir, Check: "read"}, statEnvOn(&fs), module)
	boom.Store(true)
	_, err = read.current(time.Minute)
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "the stat broke", pe.Value)
}

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

// settleDuration is how long each loop below runs: 4 s with
// RUNTIMEGUARD_LONG, else 1 s; RUNTIMEGUARD_SETTLE overrides it (for
// example 10s to match a long soak).
func settleDuration(t *testing.T) time.Duration {
	t.Helper()
	if s := os.Getenv("RUNTIMEGUARD_SETTLE"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err)
		return d
	}
	if testing.Short() || !longTests {
		return time.Second
	}
	return 4 * time.Second
}

// Binding while git renames, packs and collects garbage in a loop never
// yields an inert guard: every New either binds to the right revision or
// returns an error. A transient state (HEAD naming a branch that is being
// renamed) must not become a guard that passes every check forever.
func TestBindingDuringRefTransients(t *testing.T) {
	loops := map[string][][]string{
		"branch renames":             {{"branch", "-m", "main", "trunk"}, {"branch", "-m", "trunk", "main"}},
		"renames of the only branch": {{"branch", "-m", "main", "trunk"}, {"branch", "-m", "trunk", "main"}},
		"renames and pack-refs":      {{"branch", "-m", "main", "trunk"}, {"pack-refs", "--all"}, {"branch", "-m", "trunk", "main"}, {"pack-refs", "--all"}},
		"renames and gc":             {{"branch", "-m", "main", "trunk"}, {"gc", "-q"}, {"branch", "-m", "trunk", "main"}, {"gc", "-q"}},
	}
	for name, cmds := range loops {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := tempDir(t)
			module, rev := agentRepo(t, dir)
			// Another ref, so that HEAD naming a missing branch is never an
			// unborn repository; without it, HEAD's reflog tells.
			if name != "renames of the only branch" {
				git(t, dir, "tag", "t")
			}

			stop := make(chan struct{})
			var loopErr error
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if out, err := gittest.Command(dir, cmds[i%len(cmds)]...).CombinedOutput(); err != nil {
						loopErr = err
						t.Logf("git %v: %v: %s", cmds[i%len(cmds)], err, out)
						return
					}
				}
			}()
			var binds, inert, failed atomic.Int64
			deadline := time.Now().Add(settleDuration(t))
			for time.Now().Before(deadline) {
				g, err := New(Options{ModulePath: module, HomeDir: dir})
				binds.Add(1)
				switch {
				case err != nil:
					failed.Add(1)
				case g.Identity().Revision == "":
					inert.Add(1)
				default:
					assert.Equal(t, rev, g.Identity().Revision)
				}
			}
			close(stop)
			wg.Wait()
			require.NoError(t, loopErr)
			t.Logf("%d binds, %d inert, %d errors", binds.Load(), inert.Load(), failed.Load())
			assert.Zero(t, inert.Load(), "inert binds")
			assert.Less(t, failed.Load(), binds.Load()/10+1, "most binds find the checkout holding still")
		})
	}
}

// Capture on an unbound guard takes the same care.
func TestCaptureDuringBranchRenames(t *testing.T) {
	t.Parallel() // a repository of its own; a loop that runs for a set time
	dir := tempDir(t)
	module, rev := agentRepo(t, dir)
	git(t, dir, "tag", "t")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			from, to := "main", "trunk"
			if i%2 == 1 {
				from, to = to, from
			}
			_ = gittest.Command(dir, "branch", "-m", from, to).Run()
		}
	}()
	deadline := time.Now().Add(settleDuration(t) / 2)
	var inert int
	for time.Now().Before(deadline) {
		g, err := New(Options{HomeDir: dir})
		require.NoError(t, err)
		if err := g.Capture(module); err == nil && g.Identity().Revision == "" {
			inert++
		} else if err == nil {
			assert.Equal(t, rev, g.Identity().Revision)
		}
	}
	close(stop)
	<-done
	assert.Zero(t, inert, "inert captures")
}

// The API's errors say "runtimeguard:" once, at the start, whatever part
// of the package failed.
func TestErrorsPrefixedOnce(t *testing.T) {
	dir := tempDir(t)
	mod, _ := agentRepo(t, dir)
	loop := filepath.Join(dir, "loop.py")
	require.NoError(t, os.Symlink(loop, loop))
	writeFile(t, filepath.Join(dir, "sub", "x"), "")
	g, err := New(Options{ModulePath: mod})
	require.NoError(t, err)
	cases := map[string]func() error{
		"empty module path":    func() error { var g Guard; return g.Capture("") },
		"missing module":       func() error { _, err := New(Options{ModulePath: filepath.Join(dir, "missing.py")}); return err },
		"a directory":          func() error { _, err := New(Options{ModulePath: filepath.Join(dir, "sub")}); return err },
		"a link loop":          func() error { _, err := New(Options{ModulePath: loop}); return err },
		"a link loop, Observe": func() error { _, err := Observe(Options{ModulePath: loop, Layout: Layout{HomeEnv: "X"}}); return err },
		"a second module":      func() error { return g.Capture(filepath.Join(dir, "sub", "x")) },
	}
	// A class of the package's (a sentinel, itself prefixed) named within
	// a message is named without its prefix.
	outside := filepath.Join(tempDir(t), "run_agent.py")
	writeFile(t, outside, "x\n")
	rev := strings.Repeat("a", 40)
	cases["ExpectRevision outside Git"] = func() error {
		_, err := New(Options{ModulePath: outside, ExpectRevision: rev})
		assert.ErrorIs(t, err, ErrNotCheckout)
		return err
	}
	cases["RequireCheckout outside Git"] = func() error {
		_, err := New(Options{ModulePath: outside, RequireCheckout: true})
		assert.ErrorIs(t, err, ErrNotCheckout)
		return err
	}
	cases["ExpectReceipt while an update runs"] = func() error {
		home := tempDir(t)
		gittest.WriteMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
		_, err := New(Options{ModulePath: mod, HomeDir: home, ExpectRevision: g.Identity().Revision, ExpectReceipt: "update_id:x"})
		assert.ErrorIs(t, err, ErrNotReady)
		return err
	}
	cases["a read that timed out"] = func() error {
		h := &hangingIndex{release: make(chan struct{})}
		hg, err := newGuard(Options{ModulePath: mod, HomeDir: dir, ReadTimeout: 50 * time.Millisecond, Check: "read"}, h.env())
		require.NoError(t, err)
		h.hang.Store(true)
		defer close(h.release)
		err = hg.EnsureCurrent()
		assert.ErrorIs(t, err, ErrReadTimeout)
		return err
	}
	for name, f := range cases {
		err := f()
		require.Error(t, err, name)
		msg := err.Error()
		assert.True(t, strings.HasPrefix(msg, "runtimeguard: "), "%s: %q", name, msg)
		assert.Equal(t, 1, strings.Count(msg, "runtimeguard:"), "%s: %q", name, msg)
	}
}

// readCounter wraps a guard's file system and counts the reads (whole, or
// opened for a read through a buffer) of one file.
type readCounter struct {
	mu    sync.Mutex
	path  string
	reads int
}

func (c *readCounter) wrap(fs *gitread.FS) *gitread.FS {
	w := *fs
	w.ReadFile = func(p string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		c.count(p)
		return fs.ReadFile(p, limit, nofollow)
	}
	if fs.Open != nil {
		w.Open = func(p string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
			c.count(p)
			return fs.Open(p, limit, nofollow)
		}
	}
	return &w
}

func (c *readCounter) count(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p == c.path {
		c.reads++
	}
}

func (c *readCounter) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// A read after a change that left the index as it was (pack-refs, a
// branch made, HEAD's revision and the index unchanged) does not read the
// index again, on every path: its answer is the last read's. A change of
// the index is read, and what changed is seen.
func TestUnchangedIndexIsNotReadAgain(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			dir := tempDir(t)
			initRepo(t, dir, map[string]string{"run_agent.py": "x = 1\n", "lib.py": "y\n"})
			rev := commit(t, dir, "lib.py", "y = 2\n")
			module := filepath.Join(dir, "run_agent.py")
			// Files older than the margin of the racy rule, on the real
			// clock too.
			time.Sleep(250 * time.Millisecond)
			reads := &readCounter{path: filepath.Join(dir, ".git", "index")}
			e := mode.env(t)
			e.git = reads.wrap(e.git)
			g := bindFast(t, module, e)
			require.Equal(t, rev, g.Identity().Revision)
			if mode.name == "watch" {
				require.NoError(t, g.EnsureCurrent())
				require.True(t, onWatchPath(g), "a checkout on a local file system is watched")
			}
			bound, before := g.Stats().FullReads, reads.n()
			require.NotZero(t, before, "binding read the index")

			for _, change := range [][]string{{"pack-refs", "--all"}, {"branch", "topic"}, {"tag", "v1"}} {
				git(t, dir, change...)
				require.NoError(t, g.EnsureCurrent(), "after git %v", change)
			}
			require.Greater(t, g.Stats().FullReads, bound, "the changes were read")
			assert.Equal(t, before, reads.n(), "the unchanged index was read again")

			git(t, dir, "rm", "-q", "--cached", "run_agent.py")
			assert.ErrorIs(t, g.EnsureCurrent(), ErrStale, "the index changed: the module is no longer tracked")
			assert.Greater(t, reads.n(), before, "the changed index was read")
		})
	}
}

// An index rewritten in place, with the same size, in the same timestamp
// tick as the read that found it keeps its stamp: its answer is not taken
// again (Git's racy rule, as for every stamp), and the next read reads it
// and sees the module gone from it.
func TestSameTickIndexRewriteIsRead(t *testing.T) {
	dir := tempDir(t)
	initRepo(t, dir, map[string]string{"run_agent.py": "x = 1\n", "lib.py": "y\n"})
	module := filepath.Join(dir, "run_agent.py")
	index := filepath.Join(dir, ".git", "index")
	fi, err := os.Stat(index)
	require.NoError(t, err)
	e := testEnv(nil)
	e.now = fi.ModTime // every read begins in the tick the index was written
	e.git = frozenStamps()
	e.git.Open, e.git.ReadEnds = gitread.System.Open, gitread.System.ReadEnds
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	require.NotEmpty(t, g.Identity().Revision)
	require.NoError(t, g.EnsureCurrent())

	// The module's entry renamed in place: the same size, the same
	// order; git reads the index and no longer finds the module.
	data, err := os.ReadFile(index)
	require.NoError(t, err)
	at := bytes.Index(data, []byte("run_agent.py\x00"))
	require.Positive(t, at)
	f, err := os.OpenFile(index, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("run_agent.pz"), int64(at))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Error(t, gittest.Command(dir, "ls-files", "--error-unmatch", "run_agent.py").Run(), "git no longer finds the module")
	require.NoError(t, gittest.Command(dir, "ls-files", "--error-unmatch", "run_agent.pz").Run(), "git reads the index")

	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
}

// With Options.Check "read" every check reads the index too: no stamp is trusted.
func TestCheckReadReadsTheIndex(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	reads := &readCounter{path: filepath.Join(dir, ".git", "index")}
	e := settledEnv()
	e.git = reads.wrap(e.git)
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t), Check: "read"}, e)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		before := reads.n()
		require.NoError(t, g.EnsureCurrent())
		assert.Equal(t, before+1, reads.n(), "check %d read the index", i)
	}
}

// The index changed by git in quick succession, on every path: the module
// removed from it and added back (git rm --cached, git add), marked
// assume-unchanged or skip-worktree, the index rewritten in another
// version, split. After each, a check that says current is one git agrees
// with, run in the module's directory: it lists the module as tracked and
// names the bound revision as HEAD's.
func TestIndexRoundTripsAsGitSeesThem(t *testing.T) {
	steps := [][]string{
		{"rm", "-q", "--cached", "run_agent.py"},
		{"add", "run_agent.py"},
		{"rm", "-q", "--cached", "run_agent.py"},
		{"add", "run_agent.py"},
		{"update-index", "--assume-unchanged", "run_agent.py"},
		{"rm", "-q", "--cached", "run_agent.py"},
		{"add", "run_agent.py"},
		{"update-index", "--skip-worktree", "run_agent.py"},
		{"update-index", "--no-skip-worktree", "run_agent.py"},
		{"update-index", "--index-version", "4"},
		{"rm", "-q", "--cached", "run_agent.py"},
		{"add", "run_agent.py"},
		{"update-index", "--index-version", "2"},
		{"update-index", "--split-index"},
		{"update-index", "--no-split-index"},
		{"rm", "-q", "--cached", "run_agent.py"},
		{"add", "run_agent.py"},
	}
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			dir := tempDir(t)
			module, rev := agentRepo(t, dir)
			g := bindFast(t, module, mode.env(t))
			untracked, refused := 0, 0
			for round := 0; round < loopLength(3, 1); round++ {
				for _, step := range steps {
					gittest.Git(t, dir, step...)
					err := g.EnsureCurrent()
					tracked := gittest.Command(filepath.Dir(module), "ls-files", "--error-unmatch", "--", "run_agent.py").Run() == nil
					head := gittest.Git(t, filepath.Dir(module), "rev-parse", "HEAD")
					if !tracked {
						untracked++
					}
					if err != nil {
						refused++
					} else {
						assert.True(t, tracked && head == rev, "%s after git %v: current, where git says tracked %v, HEAD %s", gittest.Describe(), step, tracked, head)
					}
				}
			}
			assert.Positive(t, untracked, "git found the module untracked after some steps")
			assert.GreaterOrEqual(t, refused, untracked, "every untracked step refused")
		})
	}
}

// A bound checkout turned into a format the guard does not read fails
// closed, and its 409 and its log say that the repository format is
// unsupported, not only "restart": a restart would fail at New, which says
// the same. The payload's keys stay those of every stale answer.
func TestUnsupportedFormatAfterBindingSaysSo(t *testing.T) {
	for name, setup := range map[string]func(dir string){
		"split index": func(dir string) { git(t, dir, "update-index", "--split-index") },
		"unknown extension": func(dir string) {
			git(t, dir, "config", "core.repositoryformatversion", "1")
			git(t, dir, "config", "extensions.someFutureThing", "true")
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := tempDir(t)
			module, rev := agentRepo(t, dir)
			var log bytes.Buffer
			g, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Logger: slog.New(slog.NewTextHandler(&log, nil))})
			require.NoError(t, err)
			require.NoError(t, g.EnsureCurrent())
			own, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Message: "Restart by hand."})
			require.NoError(t, err)

			setup(dir)
			if name == "split index" {
				assert.Equal(t, rev, git(t, dir, "rev-parse", "HEAD"), "git reads it at the same revision")
			}
			err = g.EnsureCurrent()
			require.ErrorIs(t, err, ErrStale)
			require.ErrorIs(t, err, errors.ErrUnsupported)
			var se *StaleError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, se.Message, "repository format")
			assert.Contains(t, se.Message, "not supported")
			assert.NotEqual(t, defaultMessage, se.Message, "a restart alone does not help")
			assert.NotContains(t, strings.ToLower(se.Message), "success")

			msg, err := json.Marshal(se.Message)
			require.NoError(t, err)
			rec := httptest.NewRecorder()
			WriteStale(rec, se)
			assert.Equal(t, 409, rec.Code)
			assert.JSONEq(t, `{"error":`+string(msg)+`,"type":"agent_runtime_stale","retryable":true,"restart_scheduled":false,"agent_update_state":"unverified"}`, rec.Body.String())

			assert.Contains(t, log.String(), "repository format is not supported", "the log says why, not only that it is stale")

			// The restart the message asks for would fail so.
			_, err = New(Options{ModulePath: module, HomeDir: tempDir(t)})
			assert.ErrorIs(t, err, errors.ErrUnsupported)

			// The host's own message is the host's word, in this case too.
			err = own.EnsureCurrent()
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "Restart by hand.", se.Message)
		})
	}
}

// While a reload is scheduled its message stands, as the payload's
// restart_scheduled says, even where the checkout turned unsupported
// meanwhile; once the plan is released the message says the format is
// not supported.
func TestUnsupportedFormatWhileAReloadIsScheduled(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	require.ErrorIs(t, c.g.EnsureCurrent(), ErrStale)
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	require.NoError(t, r.Schedule())

	git(t, c.dir, "update-index", "--split-index")
	var se *StaleError
	require.ErrorAs(t, c.g.EnsureCurrent(), &se)
	require.ErrorIs(t, se, errors.ErrUnsupported)
	assert.True(t, se.RestartScheduled)
	assert.Contains(t, se.Message, "retry shortly")

	r.Release()
	require.ErrorAs(t, c.g.EnsureCurrent(), &se)
	assert.False(t, se.RestartScheduled)
	assert.Contains(t, se.Message, "repository format that is not supported")
}
