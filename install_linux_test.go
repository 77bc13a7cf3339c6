package runtimeguard

import (
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// countingFS is the file system with every stat and read counted.
func countingFS(n *atomic.Uint64) *gitread.FS {
	fsys := *gitread.System
	sys := gitread.System
	fsys.Stat = func(p string) (fsread.Stamp, error) { n.Add(1); return sys.Stat(p) }
	fsys.Lstat = func(p string) (fsread.Stamp, error) { n.Add(1); return sys.Lstat(p) }
	fsys.ReadFile = func(p string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		n.Add(1)
		return sys.ReadFile(p, limit, nofollow)
	}
	fsys.Open = func(p string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
		n.Add(1)
		return sys.Open(p, limit, nofollow)
	}
	fsys.ReadEnds = nil
	return &fsys
}

// On the watch path, a check of an unchanged install without Git is the
// one system call of every watched check: it stats and reads nothing, and
// a change makes one full read, after which checks are that call again.
func TestInstallWatchPathChecksStatNothing(t *testing.T) {
	root := filepath.Join(tempDir(t), "srv")
	gittest.Release(t, root, "1", buildA)
	gittest.Flip(t, filepath.Join(root, "current"), filepath.Join("releases", "1"))
	module := filepath.Join(root, "current", "run_agent.py")
	e := watchEnv(t)
	var calls atomic.Uint64
	e.git = countingFS(&calls)
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	defer g.Close()
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g), "an install on a local file system is watched")
	require.NoError(t, g.EnsureCurrent())

	reads, before := g.Stats().FullReads, calls.Load()
	for range 1000 {
		require.NoError(t, g.EnsureCurrent())
	}
	assert.Equal(t, before, calls.Load(), "checks of an unchanged install stat and read nothing")
	assert.Equal(t, reads, g.Stats().FullReads, "nor read it in full")

	// A write in place is an event: one full read finds the same file.
	gittest.Overwrite(t, filepath.Join(root, "releases", "1", "run_agent.py"), "class AIAgent: edited = True\n")
	require.NoError(t, g.EnsureCurrent())
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	reads, before = g.Stats().FullReads, calls.Load()
	for range 100 {
		require.NoError(t, g.EnsureCurrent())
	}
	assert.Equal(t, before, calls.Load(), "checks after the read of a write in place stat nothing again")
	assert.Equal(t, reads, g.Stats().FullReads)

	gittest.Flip(t, filepath.Join(root, "current"), filepath.Join("releases", "2"))
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale, "a flip to a release that is not there")
}

// BenchmarkEnsureCurrentWithoutGit is a check of an unchanged install
// without Git (a release behind current, its stamp naming a build): on
// the watch path one epoll_wait, on the stat path (a settled clock) a
// stat of each link on the way, the module and the stamp.
func BenchmarkEnsureCurrentWithoutGit(b *testing.B) {
	root := filepath.Join(b.TempDir(), "srv")
	gittest.Release(b, root, "1", buildA)
	gittest.Flip(b, filepath.Join(root, "current"), filepath.Join("releases", "1"))
	module := filepath.Join(root, "current", "run_agent.py")
	b.Run("watch", func(b *testing.B) {
		benchChecks(b, watchedGuard(b, module))
	})
	b.Run("stat", func(b *testing.B) {
		g := settledGuard(b, module)
		b.Logf("a check stats:%s", depList(g))
		benchChecks(b, g)
	})
}
