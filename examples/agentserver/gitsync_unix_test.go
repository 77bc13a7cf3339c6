//go:build unix

package main

import (
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// gitSyncEnv names a kubernetes/git-sync (v4) binary for the tests that
// run the real one; they skip without it.
const gitSyncEnv = "RUNTIMEGUARD_GIT_SYNC"

// gitSyncFlips is how many revisions each git-sync test publishes under
// the client.
const gitSyncFlips = 3

// gitSyncRoot is an upstream repository and git-sync's root, with the
// link the server loads through (<root>/agent).
type gitSyncRoot struct {
	upstream, root, link string
	publish              func(t *testing.T, hash string) // publishes upstream's hash at the link
}

func newGitSyncRoot(t *testing.T) (*gitSyncRoot, *deployment) {
	t.Helper()
	gittest.Need(t)
	tmp := gittest.TempDir(t)
	g := &gitSyncRoot{upstream: filepath.Join(tmp, "upstream"), root: filepath.Join(tmp, "git")}
	g.link = filepath.Join(g.root, "agent")
	_, loaded := gittest.Agent(t, g.upstream)
	return g, &deployment{link: g.link, loaded: loaded, state: filepath.Join(tmp, "sessions.json")}
}

// publishAsGitSync does what git-sync does to publish hash (main.go of
// kubernetes/git-sync: syncRepo, createWorktree, configureWorktree,
// publishSymlink, cleanup), step for step: fetch it into the root
// repository, add a detached worktree at <root>/.worktrees/<hash> without
// checkout, point its .git file at the root's by a relative path, reset
// it hard to hash, make a relative link tmp-link beside the link and
// rename it over the link, then remove every other worktree.
func (g *gitSyncRoot) publishAsGitSync(t *testing.T, hash string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(g.root, ".git")); os.IsNotExist(err) {
		require.NoError(t, os.MkdirAll(g.root, 0o755))
		gittest.Git(t, g.root, "init", "-q")
	}
	gittest.Git(t, g.root, "fetch", "-q", "--no-auto-gc", "file://"+g.upstream, hash)
	wt := filepath.Join(g.root, ".worktrees", hash)
	require.NoError(t, os.RemoveAll(wt))
	gittest.Git(t, g.root, "worktree", "add", "-q", "--force", "--detach", wt, hash, "--no-checkout")
	rel, err := filepath.Rel(wt, g.root)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+filepath.Join(rel, ".git", "worktrees", hash)+"\n"), 0o644))
	gittest.Git(t, wt, "reset", "-q", "--hard", hash, "--")
	linkDir, linkFile := filepath.Split(g.link)
	target, err := filepath.Rel(linkDir, wt)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(target, filepath.Join(linkDir, "tmp-link")))
	require.NoError(t, os.Rename(filepath.Join(linkDir, "tmp-link"), filepath.Join(linkDir, linkFile)))
	entries, err := os.ReadDir(filepath.Join(g.root, ".worktrees"))
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name() != hash {
			require.NoError(t, os.RemoveAll(filepath.Join(g.root, ".worktrees", e.Name())))
		}
	}
	gittest.Git(t, g.root, "worktree", "prune")
}

// publishWithGitSync runs the git-sync binary at bin once (--one-time),
// with the git at git, to sync upstream's branch into the link: no
// network, not even loopback (the repository is a file:// URL, no
// --http-bind), and its home and temporary directory, where it writes its
// own global git config, are the test's.
func (g *gitSyncRoot) publishWithGitSync(bin, git string) func(t *testing.T, hash string) {
	return func(t *testing.T, hash string) {
		t.Helper()
		home := filepath.Join(filepath.Dir(g.root), "git-sync-home")
		require.NoError(t, os.MkdirAll(home, 0o755))
		branch := gittest.Git(t, g.upstream, "symbolic-ref", "--short", "HEAD")
		cmd := exec.Command(bin, "--repo", "file://"+g.upstream, "--ref", branch, "--root", g.root, "--link", filepath.Base(g.link),
			"--one-time", "--git", git, "--http-bind", "", "--stale-worktree-timeout", "0s", "--verbose", "2")
		// It makes its own global config in the temporary directory.
		cmd.Env = append(append([]string(nil), gittest.Env...), "HOME="+home, "TMPDIR="+home)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git-sync: %s", out)
		target, err := os.Readlink(g.link)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(".worktrees", hash), target, "git-sync published %s", target)
	}
}

// reloadsOnEachFlip publishes gitSyncFlips revisions, one after the other
// once the server serves the last, under a client without pause, and
// checks every flip's answers: 200 from the old revision, 409 retryable,
// 200 from the new one, in that order, none refused, reset or 5xx, by the
// same process, with no receipt anywhere.
func reloadsOnEachFlip(t *testing.T, g *gitSyncRoot, d *deployment, mode string) {
	g.publish(t, d.loaded)
	d.start(t, mode)
	c := d.client(t)
	c.until(t, "from the first revision", func(a answer) bool { return a.revision == d.loaded })
	revs, starts := []string{d.loaded}, []int{}
	for i := 0; i < gitSyncFlips; i++ {
		rev := gittest.Commit(t, g.upstream, "run_agent.py", fmt.Sprintf("class AIAgent: revision = %d\n", i+2))
		c.mu.Lock()
		starts = append(starts, len(c.answers))
		c.mu.Unlock()
		g.publish(t, rev)
		revs = append(revs, rev)
		c.until(t, "from revision "+rev, func(a answer) bool { return a.revision == rev })
	}
	time.Sleep(200 * time.Millisecond) // answers after the last reload too
	answers := c.finish()
	starts = append(starts, len(answers))
	for i := 0; i < gitSyncFlips; i++ {
		olds, conflicts, news := phases(t, answers[starts[i]:starts[i+1]], revs[i], revs[i+1])
		t.Logf("flip %d, %s to %s: %d old, %d 409, %d new", i+1, revs[i][:8], revs[i+1][:8], olds, conflicts, news)
		assert.Positive(t, news, "flip %d", i+1)
	}
	for i, a := range answers {
		if a.status == http.StatusOK {
			assert.Equal(t, float64(d.pid), a.pid, "answer %d: the same process serves throughout", i)
		} else {
			assert.NotContains(t, a.message, "manually", "answer %d: %+v", i, a)
		}
	}
	// Nothing but the flips proved the reloads: no receipt, no marker.
	require.NoError(t, filepath.WalkDir(filepath.Dir(g.root), func(path string, e fs.DirEntry, err error) error {
		if err == nil && (strings.Contains(e.Name(), "receipt") || strings.Contains(e.Name(), "update-in-progress")) {
			t.Errorf("%s: no updater's file should be there", path)
		}
		return err
	}))
}

// The server loads through git-sync's link: each flip, made as git-sync
// makes it, reloads it by itself with no request lost.
func TestGitSyncFlipsReload(t *testing.T) {
	for _, mode := range []string{reloadInProcess, reloadExec} {
		t.Run(mode, func(t *testing.T) {
			g, d := newGitSyncRoot(t)
			g.publish = g.publishAsGitSync
			reloadsOnEachFlip(t, g, d, mode)
		})
	}
}

// The same with the real git-sync binary that RUNTIMEGUARD_GIT_SYNC names.
// It needs, besides, a git of 2.46 or newer (git-sync lists git's config
// with git config list): the tests' own, or the one
// RUNTIMEGUARD_CURRENT_GIT names; it skips, saying which is missing,
// without either.
func TestRealGitSyncFlipsReload(t *testing.T) {
	bin := os.Getenv(gitSyncEnv)
	if bin == "" {
		t.Skip(gitSyncEnv + " names no git-sync binary (build kubernetes/git-sync v4 from its source, go build -mod=vendor); the test needs it, and a git of 2.46 or newer (the tests' own, or " + gittest.EnvCurrentGit + ")")
	}
	git := gittest.Current(t, 2, 46) // skips, saying why, before anything runs
	out, err := exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s --version: %s", bin, out)
	t.Logf("git-sync %s", strings.TrimSpace(string(out)))
	for _, mode := range []string{reloadInProcess, reloadExec} {
		t.Run(mode, func(t *testing.T) {
			g, d := newGitSyncRoot(t)
			g.publish = g.publishWithGitSync(bin, git)
			reloadsOnEachFlip(t, g, d, mode)
		})
	}
}
