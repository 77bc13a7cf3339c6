package runtimeguard

import (
	"context"
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
	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// releaseRepo makes a checkout whose HEAD is on release/1.2, a branch
// whose name has a slash, and returns its module.
func releaseRepo(t *testing.T, dir string) string {
	t.Helper()
	module, _ := agentRepo(t, dir)
	gittest.Git(t, dir, "checkout", "-q", "-b", "release/1.2")
	gittest.Git(t, dir, "branch", "-q", "-D", "main")
	return module
}

// startWatch runs g.Watch until the test ends and returns the channel of
// its result.
func startWatch(t *testing.T, g *Guard, interval time.Duration) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done, exited := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(exited)
		done <- g.Watch(ctx, interval)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	return done
}

// requireChanged waits for g.Changed, which must fire without a request.
func requireChanged(t *testing.T, g *Guard, why string) {
	t.Helper()
	select {
	case <-g.Changed():
	case <-time.After(10 * time.Second):
		t.Fatalf("Changed did not fire within 10s %s (check path %q: %s)", why, g.Observe().Check, g.Observe().CheckReason)
	}
}

// A packed branch whose name has a slash takes the watch path: the
// missing refs/heads/release is not watched, refs/heads reports its
// creation, and the next commit is seen.
func TestPackedSlashBranchTakesTheWatchPath(t *testing.T) {
	dir := tempDir(t)
	module := releaseRepo(t, dir)
	gittest.Git(t, dir, "pack-refs", "--all")
	_, err := os.Stat(filepath.Join(dir, ".git", "refs", "heads", "release"))
	require.ErrorIs(t, err, os.ErrNotExist, "pack-refs pruned the branch's directory")
	g := watched(t, module, watchEnv(t))
	startWatch(t, g, time.Hour)
	gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")
	requireChanged(t, g, "after a commit on a packed release/1.2")
}

// HEAD on a loose release/1.2, then git pack-refs --all (what gc --auto
// runs after a fetch): Watch still sees the next commit.
func TestWatchSeesACommitAfterPackRefs(t *testing.T) {
	dir := tempDir(t)
	module := releaseRepo(t, dir)
	g := watched(t, module, watchEnv(t))
	startWatch(t, g, time.Hour)
	gittest.Git(t, dir, "pack-refs", "--all")
	require.Eventually(t, func() bool {
		s := g.bound.Load().snap.Load()
		return s != nil && hasDep(s, filepath.Join(dir, ".git", "packed-refs"))
	}, 10*time.Second, time.Millisecond, "Watch read the packed branch")
	gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")
	requireChanged(t, g, "after pack-refs and a commit")
}

// hasDep reports whether the snapshot depends on path.
func hasDep(s *snapshot, path string) bool {
	for _, d := range s.Deps {
		if d.Path == path {
			return true
		}
	}
	return false
}

// relink points the link at path to target, atomically, as a deploy
// flips a "current" link.
func relink(t *testing.T, path, target string) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.Symlink(target, tmp))
	require.NoError(t, os.Rename(tmp, path))
}

// flippable is a checkout reached through a link, current, that can be
// flipped to lead through a FUSE file system of the test's own (whose
// changes inotify does not report) to the same checkout; a guard is
// bound through it on the watch path.
func flippable(t *testing.T) (g *Guard, repo, current, viaFUSE string) {
	t.Helper()
	dir := tempDir(t)
	repo = filepath.Join(dir, "repo")
	agentRepo(t, repo)
	f := hungMount(t, map[string]string{"repo": repo}) // answers: it is never told to hang
	current = filepath.Join(dir, "current")
	require.NoError(t, os.Symlink(repo, current))
	return watched(t, filepath.Join(current, "run_agent.py"), watchEnv(t)), repo, current, filepath.Join(f.Dir, "repo")
}

// A binding that falls back to the stat path re-arms once it can watch
// again.
func TestFallenBackBindingRearms(t *testing.T) {
	g, repo, current, viaFUSE := flippable(t)
	relink(t, current, viaFUSE)
	require.NoError(t, g.EnsureCurrent())
	require.Equal(t, "stat", g.Observe().Check)
	relink(t, current, repo)
	require.NoError(t, g.EnsureCurrent())
	require.NoError(t, g.EnsureCurrent())
	assert.Equal(t, "watch", g.Observe().Check, "re-armed once the link led back to a local file system")
}

// A binding that changes path makes Watch pick its event source again:
// Changed fires on the next commit.
func TestWatchFollowsTheBindingAcrossPaths(t *testing.T) {
	g, repo, current, viaFUSE := flippable(t)
	startWatch(t, g, 20*time.Millisecond)
	relink(t, current, viaFUSE)
	require.Eventually(t, func() bool { return g.Observe().Check == "stat" }, 10*time.Second, time.Millisecond,
		"Watch's check saw the link flipped")
	// The events of the flip are all handled before the commit: only the
	// source Watch waits on now can tell it of the commit.
	time.Sleep(100 * time.Millisecond)
	gittest.Commit(t, repo, "run_agent.py", "class AIAgent: moved = True\n")
	requireChanged(t, g, "after the binding left the watch path and the checkout moved")
}

// Close releases the guard's watches (none it registered stays in the
// kernel unless another subscription holds it), ends Watch, is idempotent
// and safe while checks run; checks after it take the stat path.
func TestCloseReleasesTheWatches(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g := watched(t, module, watchEnv(t))
	w, err := watch.Shared()
	require.NoError(t, err)
	wds := g.bound.Load().sub.Load().Registered()
	require.NotEmpty(t, wds)
	done := startWatch(t, g, time.Hour)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				assert.NoError(t, g.EnsureCurrent())
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, g.Close())
	require.NoError(t, g.Close())
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not end once the guard was closed")
	}
	require.NoError(t, g.EnsureCurrent())
	assert.Equal(t, "stat", g.Observe().Check)
	assert.Nil(t, g.bound.Load().sub.Load())
	for _, wd := range wds {
		assert.False(t, w.Leaked(wd), "watch %d left in the kernel with no subscription", wd)
	}
}

// A commit made while Watch reads the checkout, after the read looked up
// the branch (at its last look, the route walk's): the read answers the
// revision before it, and the commit's events are drained by the read's
// own arming, not by Watch's wait. Watch
// must still see that the checkout moved (the subscription is dirty), and
// fire Changed with no other event and no check.
func TestWatchSeesACommitMadeDuringItsRead(t *testing.T) {
	dir := tempDir(t)
	module := releaseRepo(t, dir)
	packed := filepath.Join(dir, ".git", "packed-refs")
	var armed atomic.Bool
	var once sync.Once
	e := watchEnv(t)
	fsys := *gitread.System
	fsys.Lstat = func(path string) (fsread.Stamp, error) {
		st, err := gitread.System.Lstat(path)
		if path == packed && armed.Load() {
			// The route walk's look at packed-refs, the read's last.
			once.Do(func() { gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n") })
		}
		return st, err
	}
	e.git = &fsys
	gittest.Git(t, dir, "pack-refs", "--all")
	g := watched(t, module, e)
	startWatch(t, g, time.Hour)
	require.Eventually(t, func() bool {
		s := g.bound.Load().snap.Load()
		return s != nil && s.Claim != nil && !s.Claim.Dirty() && hasDep(s, packed)
	}, 10*time.Second, time.Millisecond, "Watch read the packed branch")
	armed.Store(true)
	// One event, which Watch reads after: the read reads packed-refs
	// again, and the commit is made then.
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(packed, later, later))
	requireChanged(t, g, "after a commit made during the read")
}
