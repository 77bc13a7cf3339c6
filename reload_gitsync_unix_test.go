//go:build unix

package runtimeguard

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// gitSyncCase is git-sync's root: a repository at upstream's revisions,
// worktrees under .worktrees, and the link agent a guard binds through.
type gitSyncCase struct {
	upstream, root, link string
	revs                 []string // upstream's revisions, oldest first
}

// newGitSyncCase makes upstream with two revisions and publishes the
// first at the link.
func newGitSyncCase(t *testing.T) *gitSyncCase {
	t.Helper()
	tmp := tempDir(t)
	c := &gitSyncCase{upstream: filepath.Join(tmp, "upstream"), root: filepath.Join(tmp, "git")}
	c.link = filepath.Join(c.root, "agent")
	_, first := agentRepo(t, c.upstream)
	c.revs = []string{first, commit(t, c.upstream, "run_agent.py", "class AIAgent: revision = 2\n")}
	git(t, tmp, "clone", "-q", "--bare", c.upstream, filepath.Join(c.root, ".git"))
	c.flip(t, c.worktree(t, first, first))
	return c
}

// worktree adds the worktree .worktrees/name at revision rev, as
// git-sync's createWorktree does (detached, then reset to rev), and
// returns its path relative to the root.
func (c *gitSyncCase) worktree(t *testing.T, name, rev string) string {
	t.Helper()
	rel := filepath.Join(".worktrees", name)
	git(t, c.root, "worktree", "add", "-q", "--force", "--detach", rel, rev, "--no-checkout")
	git(t, filepath.Join(c.root, rel), "reset", "-q", "--hard", rev, "--")
	return rel
}

// flip points the link at target as git-sync's publishSymlink does: a new
// link tmp-link renamed over it.
func (c *gitSyncCase) flip(t *testing.T, target string) {
	t.Helper()
	tmp := filepath.Join(c.root, "tmp-link")
	require.NoError(t, os.Symlink(target, tmp))
	require.NoError(t, os.Rename(tmp, c.link))
}

// guard binds a guard with git-sync's layout through the link.
func (c *gitSyncCase) guard(t *testing.T) *Guard {
	t.Helper()
	g, err := New(Options{ModulePath: filepath.Join(c.link, "run_agent.py"), Layout: GitSyncLayout(c.link)})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	require.Equal(t, c.revs[0], g.Identity().Revision)
	return g
}

// A flip to a worktree at the revision it is named after proves a reload,
// once; the guard bound anew finds nothing left to reload.
func TestGitSyncFlipProvesAReload(t *testing.T) {
	c := newGitSyncCase(t)
	g := c.guard(t)
	_, err := g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady, "before any flip")

	c.flip(t, c.worktree(t, c.revs[1], c.revs[1]))
	require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
	r, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	defer r.Release()
	assert.Equal(t, c.revs[0], r.From)
	assert.Equal(t, c.revs[1], r.To)
	assert.Equal(t, "success", r.Receipt.Outcome)
	assert.Equal(t, c.link, r.Receipt.ID[len(flipPrefix):len(flipPrefix)+len(c.link)])
	require.NoError(t, r.Bind(context.Background()))
	assert.Equal(t, c.revs[1], g.Identity().Revision)
	assert.NoError(t, g.EnsureCurrent())
	_, err = g.PlanReload(context.Background())
	assert.ErrorContains(t, err, "not stale")
}

// Each refusal: the flip seen at the binding, a worktree whose HEAD is not
// the revision it is named after, a module not tracked there, a link that
// leads to no worktree named by a revision or to another worktree than
// the module's, and a flip a scheduled plan spent.
func TestGitSyncRefusals(t *testing.T) {
	t.Run("the flip seen at the binding", func(t *testing.T) {
		c := newGitSyncCase(t)
		g := c.guard(t)
		// The worktree the link led to when the guard bound moves: the
		// guard is stale, and the link the same.
		wt := filepath.Join(c.root, ".worktrees", c.revs[0])
		git(t, wt, "reset", "-q", "--hard", c.revs[1])
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err := g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "nothing proves this move")
		assert.False(t, isPending(err))
	})
	t.Run("HEAD is not the revision the worktree is named after", func(t *testing.T) {
		c := newGitSyncCase(t)
		g := c.guard(t)
		third := commit(t, c.upstream, "run_agent.py", "class AIAgent: revision = 3\n")
		git(t, c.root, "fetch", "-q", c.upstream, third)
		c.flip(t, c.worktree(t, c.revs[1], third))
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err := g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "is for revision "+c.revs[1]+", and HEAD is at "+third)
	})
	t.Run("the module is not tracked there", func(t *testing.T) {
		c := newGitSyncCase(t)
		g := c.guard(t)
		git(t, c.upstream, "rm", "-q", "--cached", "run_agent.py")
		git(t, c.upstream, "commit", "-q", "-m", "untrack the module")
		untracked := git(t, c.upstream, "rev-parse", "HEAD")
		git(t, c.root, "fetch", "-q", c.upstream, untracked)
		rel := c.worktree(t, untracked, untracked)
		writeFile(t, filepath.Join(c.root, rel, "run_agent.py"), "class AIAgent: pass\n")
		c.flip(t, rel)
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err := g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "is no longer tracked")
	})
	t.Run("the link leads to no worktree named by a revision", func(t *testing.T) {
		c := newGitSyncCase(t)
		g := c.guard(t)
		c.flip(t, c.worktree(t, "next", c.revs[1]))
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err := g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "not to a worktree .worktrees/<revision>")
	})
	t.Run("the module is in another worktree", func(t *testing.T) {
		c := newGitSyncCase(t)
		// The guard binds through a link of its own that leads where
		// git-sync's does, until they part.
		own := filepath.Join(c.root, "own")
		require.NoError(t, os.Symlink(filepath.Join(".worktrees", c.revs[0]), own))
		g, err := New(Options{ModulePath: filepath.Join(own, "run_agent.py"), Layout: GitSyncLayout(c.link)})
		require.NoError(t, err)
		defer g.Close()
		c.flip(t, c.worktree(t, c.revs[1], c.revs[1]))
		elsewhere := filepath.Join(filepath.Dir(c.root), "elsewhere")
		git(t, c.root, "worktree", "add", "-q", "--detach", filepath.Join(elsewhere, ".worktrees", c.revs[1]), c.revs[1])
		require.NoError(t, os.Remove(own))
		require.NoError(t, os.Symlink(filepath.Join(elsewhere, ".worktrees", c.revs[1]), own))
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err = g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "and the module is in "+resolved(t, filepath.Join(elsewhere, ".worktrees", c.revs[1])))
	})
	t.Run("a spent flip", func(t *testing.T) {
		c := newGitSyncCase(t)
		g := c.guard(t)
		rel := c.worktree(t, c.revs[1], c.revs[1])
		c.flip(t, rel)
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		r, err := g.PlanReload(context.Background())
		require.NoError(t, err)
		require.NoError(t, r.Schedule())
		r.Release()
		_, err = g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "already scheduled on the receipt "+r.Receipt.ID)
		// A new flip to the same worktree is a new proof.
		c.flip(t, rel)
		r2, err := g.PlanReload(context.Background())
		require.NoError(t, err)
		defer r2.Release()
		assert.NotEqual(t, r.Receipt.ID, r2.Receipt.ID)
	})
}

// A layout proves by its link or by receipts, never both; one with a link
// needs no marker.
func TestGitSyncLayoutValidation(t *testing.T) {
	l := GitSyncLayout("/git/agent")
	assert.NoError(t, l.validate())
	assert.False(t, l.isZero())
	l.Receipt = "latest.json"
	assert.ErrorContains(t, l.validate(), "Layout.Link")
}

// A plan made right after the flip, before any check read the checkout
// again, sees the same: the directory the link now leads to is one whose
// recovery markers count, found by the plan's own read, not a change
// while it read.
func TestGitSyncFlipProvesAReloadBeforeAnyCheck(t *testing.T) {
	c := newGitSyncCase(t)
	g := c.guard(t)
	c.flip(t, c.worktree(t, c.revs[1], c.revs[1]))
	r, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	defer r.Release()
	assert.Equal(t, c.revs[1], r.To)
	assert.Equal(t, filepath.Join(c.root, ".worktrees", c.revs[1]), r.Identity.SourceDir)
}

// git-sync flipping A, B, A, B: every flip is reloaded, the last too,
// though it leads where the second did (its link file may even reuse that
// one's inode): what a plan spent is forgotten once the binding it moved
// is gone, and a flip's receipt is named by what it leads to and when it
// was made, never by its link's file.
func TestGitSyncFlipsBackAndForth(t *testing.T) {
	c := newGitSyncCase(t)
	g := c.guard(t)
	a := filepath.Join(".worktrees", c.revs[0])
	b := c.worktree(t, c.revs[1], c.revs[1])
	var ids []string
	for i, to := range []string{b, a, b, a} {
		c.flip(t, to)
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale, "flip %d", i)
		r, err := g.PlanReload(context.Background())
		require.NoError(t, err, "flip %d", i)
		require.NoError(t, r.Schedule(), "flip %d", i)
		require.NoError(t, r.Bind(context.Background()), "flip %d", i)
		require.NoError(t, g.EnsureCurrent(), "flip %d", i)
		st, err := fsread.LstatStamp(c.link)
		require.NoError(t, err)
		assert.NotContains(t, r.Receipt.ID, st.FileID(), "a flip's ID names no file identity")
		assert.Contains(t, r.Receipt.ID, to, "a flip's ID names what it leads to")
		assert.NotContains(t, ids, r.Receipt.ID)
		ids = append(ids, r.Receipt.ID)
	}
}
