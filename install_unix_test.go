//go:build unix

package runtimeguard

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// Release directories behind a link (Capistrano-style deploys, rsync into
// releases/<n>/ and a flip of current): a check of the install bound
// through current/run_agent.py is stale once the link leads to another
// release, whatever its stamp names, and current again once it leads back;
// on every check path.
func TestInstallReleaseLinks(t *testing.T) {
	root := func(module string) string { return filepath.Dir(filepath.Dir(module)) } // module: root/current/run_agent.py
	flipTo := func(t *testing.T, module, release, build string) {
		r := root(module)
		if _, err := os.Stat(filepath.Join(r, "releases", release)); err != nil {
			gittest.Release(t, r, release, build)
		}
		gittest.Flip(t, filepath.Join(r, "current"), filepath.Join("releases", release))
	}
	cases := []installCase{
		{name: "current flipped to another release", build: buildA, change: func(t *testing.T, module string) {
			flipTo(t, module, "2", buildB)
		}, stale: true, why: "now leads to"},
		{name: "current flipped to another release of the same build", build: buildA, change: func(t *testing.T, module string) {
			flipTo(t, module, "2", buildA)
		}, stale: true, why: "now leads to"},
		{name: "current flipped to another release of files alone", change: func(t *testing.T, module string) {
			flipTo(t, module, "2", "")
		}, stale: true, why: "now leads to"},
		{name: "current flipped away and back", build: buildA, change: func(t *testing.T, module string) {
			flipTo(t, module, "2", buildB)
			flipTo(t, module, "1", buildA)
		}},
		{name: "current flipped anew to the same release", build: buildA, change: func(t *testing.T, module string) {
			flipTo(t, module, "1", buildA)
		}},
		{name: "the release renamed away and another put in its place", build: buildA, change: func(t *testing.T, module string) {
			r := root(module)
			require.NoError(t, os.Rename(filepath.Join(r, "releases", "1"), filepath.Join(r, "releases", "1.old")))
			gittest.Release(t, r, "1", buildA)
		}, stale: true, why: "another file"},
		{name: "the release removed", build: buildA, change: func(t *testing.T, module string) {
			require.NoError(t, os.RemoveAll(filepath.Join(root(module), "releases", "1")))
		}, stale: true},
		{name: "the module made a link to another file", build: buildA, change: func(t *testing.T, module string) {
			dir := filepath.Join(root(module), "releases", "1")
			writeFile(t, filepath.Join(dir, "other.py"), "class AIAgent: pass\n")
			gittest.Flip(t, filepath.Join(dir, "run_agent.py"), "other.py")
		}, stale: true, why: "now leads to"},
		{name: "a file renamed over the module in the release", build: buildA, change: func(t *testing.T, module string) {
			gittest.Replace(t, filepath.Join(root(module), "releases", "1", "run_agent.py"), "class AIAgent: pass\n")
		}, stale: true, why: "another file"},
		{name: "the stamp of the release naming another build", build: buildA, change: func(t *testing.T, module string) {
			gittest.Replace(t, filepath.Join(root(module), "releases", "1", gittest.StampFile), gittest.Stamp(buildB, nil))
		}, stale: true, current: buildB},
		{name: "another release made beside, current untouched", build: buildA, change: func(t *testing.T, module string) {
			gittest.Release(t, root(module), "2", buildB)
		}},
	}
	runInstallCases(t, cases, func(t *testing.T, build string) (string, string) {
		r := filepath.Join(tempDir(t), "srv")
		gittest.Release(t, r, "1", build)
		require.NoError(t, os.Symlink(filepath.Join("releases", "1"), filepath.Join(r, "current")))
		module := filepath.Join(r, "current", "run_agent.py")
		return module, module
	})
}

// releaseInstall makes root/releases/1, an install whose stamp names
// build, behind root/current, and returns the module through the link.
func releaseInstall(t *testing.T, root, build string) string {
	t.Helper()
	gittest.Release(t, root, "1", build)
	gittest.Flip(t, filepath.Join(root, "current"), filepath.Join("releases", "1"))
	return filepath.Join(root, "current", "run_agent.py")
}

// A move of an install without Git proves nothing by itself: not a flip
// to another release, not even with a success receipt written since for
// the build the new release's stamp names. The plan is refused for good
// (not "not yet"), and a Reloader leaves the guard's own message, the
// manual 409, and never restarts.
func TestInstallMoveProvesNoReload(t *testing.T) {
	tmp := tempDir(t)
	root, home := filepath.Join(tmp, "srv"), filepath.Join(tmp, "home")
	module := releaseInstall(t, root, buildA)
	require.NoError(t, os.MkdirAll(home, 0o755))
	g, err := New(Options{ModulePath: module, HomeDir: home, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer g.Close()
	var restarts atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	rl, err := NewReloader(ctx, g, ReloaderOptions{
		ProofInterval: 5 * time.Millisecond,
		Restart:       func(context.Context, *Plan) error { restarts.Add(1); return nil },
	})
	require.NoError(t, err)
	defer func() { cancel(); <-rl.Done() }()

	gittest.Release(t, root, "2", buildB)
	writeFile(t, filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", buildA, buildB, time.Now().Add(time.Second)))
	gittest.Flip(t, filepath.Join(root, "current"), filepath.Join("releases", "2"))
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	_, err = g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	assert.False(t, isPending(err), "refused for good, not for now: %v", err)
	assert.ErrorContains(t, err, "install without Git")

	require.Eventually(t, func() bool {
		err := g.EnsureCurrent()
		return errors.As(err, &se) && se.Message == defaultMessage
	}, 10*time.Second, time.Millisecond, "the Reloader gives the manual 409 back")
	assert.False(t, se.RestartScheduled)
	assert.Equal(t, int32(0), restarts.Load())
	assert.Equal(t, uint64(0), g.Stats().Reloads)
}

// git-sync's layout proves a reload by the flip of its link, whatever the
// code bound before was: a guard bound to a module its worktree does not
// track (bound without Git, by the file) reloads once git-sync flips the
// link to a worktree of the revision it is named after.
func TestGitSyncFlipProvesAReloadOfAnInstallWithoutGit(t *testing.T) {
	c := newGitSyncCase(t)
	wt := filepath.Join(c.root, ".worktrees", c.revs[0])
	writeFile(t, filepath.Join(wt, "plugin.py"), "PLUGIN = 1\n") // not tracked
	g, err := New(Options{ModulePath: filepath.Join(c.link, "plugin.py"), Layout: GitSyncLayout(c.link), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer g.Close()
	require.Equal(t, "file", g.Observe().IdentifiedBy)

	commit(t, c.upstream, "plugin.py", "PLUGIN = 2\n")
	rev := git(t, c.upstream, "rev-parse", "HEAD")
	git(t, c.root, "fetch", "-q", c.upstream, "main")
	c.flip(t, c.worktree(t, rev, rev))
	require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
	r, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	defer r.Release()
	assert.Empty(t, r.From)
	assert.Equal(t, rev, r.To)
	require.NoError(t, r.Bind(context.Background()))
	assert.Equal(t, rev, g.Identity().Revision)
	assert.Equal(t, "git", g.Observe().IdentifiedBy)
	assert.NoError(t, g.EnsureCurrent())
}
