package runtimeguard

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// countingEnv is the watch path's environment, counting full reads (each
// reads the repository's config once; an unchanged index is not read
// again).
func countingEnv(t testing.TB) (*env, *atomic.Int64) {
	t.Helper()
	e := watchEnv(t)
	var reads atomic.Int64
	fsys := *gitread.System
	fsys.ReadFile = func(path string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		if filepath.Base(path) == "config" {
			reads.Add(1)
		}
		return fsread.ReadRegular(path, limit, nofollow)
	}
	e.git = &fsys
	return e, &reads
}

// watched binds a guard on the watch path and checks until it is there.
func watched(t *testing.T, module string, e *env) *Guard {
	t.Helper()
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g), "the guard took the watch path")
	// A first read of files too recent to trust reads once more, now
	// watched: let it happen before the caller measures.
	require.NoError(t, g.EnsureCurrent())
	o := g.Observe()
	require.Equal(t, "watch", o.Check)
	return g
}

// writeRef replaces the branch's loose ref as git does: a lock file
// renamed over it.
func writeRef(t *testing.T, dir, rev string) {
	t.Helper()
	ref := filepath.Join(dir, ".git", "refs", "heads", "main")
	require.NoError(t, os.WriteFile(ref+".lock", []byte(rev+"\n"), 0o644))
	require.NoError(t, os.Rename(ref+".lock", ref))
}

// A check that begins after a rename returned sees it, every time: the
// kernel queues the event inside the rename.
func TestWatchSeesARenameAtOnce(t *testing.T) {
	dir := tempDir(t)
	module, first := agentRepo(t, dir)
	second := commit(t, dir, "run_agent.py", "x = 2\n")
	writeRef(t, dir, first)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	require.Equal(t, first, g.Identity().Revision)

	rounds := loopLength(2000, 200)
	misses := 0
	for i := 0; i < rounds; i++ {
		writeRef(t, dir, second)
		if g.EnsureCurrent() == nil {
			misses++
		}
		writeRef(t, dir, first)
		if g.EnsureCurrent() != nil {
			misses++
		}
	}
	assert.Zero(t, misses, "checks right after a rename that gave the wrong answer, of %d", 2*rounds)
	assert.True(t, onWatchPath(g))
	t.Logf("%d renames, %d full reads", 2*rounds, reads.Load())
}

// Changes the answer does not depend on cost no full read: another
// branch, FETCH_HEAD, lock files, a chmod of a Git file the answer does
// not read, files elsewhere in the directories watched. (What is at the
// module's own name is a dependency: a chmod of the module file changes
// its stamp, and is read once.)
func TestWatchUnrelatedChangesCostNoRead(t *testing.T) {
	mountsStill(t, func(c *gittest.Trial) { unrelatedChanges(t, c) })
}

// unrelatedChanges makes changes beside a watched checkout that change
// nothing its answer depends on, checking after each, and tells c of the
// full reads they cost; then a commit is stale.
func unrelatedChanges(t *testing.T, c *gittest.Trial) {
	dir := tempDir(t)
	module, rev := agentRepo(t, dir)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	before := reads.Load()
	for _, change := range []func(){
		func() { git(t, dir, "branch", "topic") },
		func() { writeFile(t, filepath.Join(dir, ".git", "FETCH_HEAD"), rev+"\t\tbranch 'main' of elsewhere\n") },
		func() { writeFile(t, filepath.Join(dir, ".git", "index.lock"), "") },
		func() { require.NoError(t, os.Remove(filepath.Join(dir, ".git", "index.lock"))) },
		func() { require.NoError(t, os.Chmod(filepath.Join(dir, ".git", "description"), 0o600)) },
		func() { writeFile(t, filepath.Join(dir, "notes.txt"), "unrelated\n") },
		func() { writeFile(t, filepath.Join(filepath.Dir(dir), "sibling.txt"), "unrelated\n") },
	} {
		change()
		require.NoError(t, g.EnsureCurrent())
	}
	assert.Zero(c, reads.Load()-before, "full reads after unrelated changes")
	assert.True(t, onWatchPath(g))

	commit(t, dir, "run_agent.py", "moved\n")
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
}

// An overflowed event queue loses events: every subscription reads again,
// and the answer stays right.
func TestWatchOverflow(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	limit := 16384
	if data, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		fmt.Sscan(strings.TrimSpace(string(data)), &limit)
	}
	junk := filepath.Join(dir, ".git", "junk")
	for i := 0; i <= limit/2+1; i++ { // two events a round
		require.NoError(t, os.WriteFile(junk, nil, 0o644))
		require.NoError(t, os.Remove(junk))
	}
	before := reads.Load()
	require.NoError(t, g.EnsureCurrent())
	assert.Greater(t, reads.Load(), before, "an overflow makes the check read again")
	commit(t, dir, "run_agent.py", "moved\n")
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
}

// A bind mount over refs/heads changes what HEAD resolves to without an
// inotify event: the mount table's change, polled in the same call,
// catches it.
func TestWatchBindMountOverRefs(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	moved := commit(t, dir, "lib.py", "x\n")
	first := git(t, dir, "rev-parse", "HEAD~1")
	writeRef(t, dir, first)
	other := tempDir(t)
	writeFile(t, filepath.Join(other, "main"), moved+"\n")
	g := watched(t, module, watchEnv(t))
	require.NoError(t, g.EnsureCurrent())

	heads := filepath.Join(dir, ".git", "refs", "heads")
	if out, err := exec.Command("mount", "--bind", other, heads).CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount here (needs root and mount(8)): %v: %s", err, out)
	}
	defer exec.Command("umount", heads).Run()
	require.Equal(t, moved, git(t, dir, "rev-parse", "HEAD"))
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se, "the check right after the mount")
	assert.Equal(t, moved, se.Current)
}

// A guard that cannot watch keeps the stat path and says why; Options.Check "read"
// reads.
func TestCheckPathIsReported(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e := statEnv()
	e.watch = func() (*watch.Watcher, error) { return nil, errors.New("no inotify descriptor left") }
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir}, e)
	require.NoError(t, err)
	o := g.Observe()
	assert.Equal(t, "stat", o.Check)
	assert.Equal(t, "no inotify descriptor left", o.CheckReason)

	g, err = newGuard(Options{ModulePath: module, HomeDir: dir, Check: "read"}, watchEnv(t))
	require.NoError(t, err)
	assert.Equal(t, "read", g.Observe().Check)

	var unbound Guard
	assert.Empty(t, unbound.Observe().Check)
}

// A closed guard checks on the stat path from Close on, and its
// Observation says so at once, before any check.
func TestClosedGuardReportsTheStatPath(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir}, watchEnv(t))
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	require.Equal(t, "watch", g.Observe().Check)
	require.NoError(t, g.Close())
	o := g.Observe()
	assert.Equal(t, "stat", o.Check)
	assert.Equal(t, "the guard is closed", o.CheckReason)
	require.NoError(t, g.EnsureCurrent())
	assert.Equal(t, "stat", g.Observe().Check)
}

// mountsStill runs round until the process's watcher saw no change of the
// mount table while it ran (see gittest.Still): a mount by any process
// makes every subscription read again, rightly, which explains a watch
// path that read or saw what the round says it must not.
func mountsStill(t *testing.T, round func(c *gittest.Trial)) {
	t.Helper()
	w, err := watch.Shared()
	require.NoError(t, err)
	gittest.Still(t, w.MountChanges, round)
}
