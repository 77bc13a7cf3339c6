//go:build unix

package gitread

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// gitAnswer is what git says in dir about module: HEAD's revision when
// the index tracks module, or "" when git gives no revision for it.
func gitAnswer(t *testing.T, dir, module string) string {
	t.Helper()
	out, err := gittest.Command(dir, "rev-parse", "--verify", "-q", "HEAD").Output()
	if err != nil {
		return ""
	}
	if gittest.Command(dir, "ls-files", "--error-unmatch", "--", filepath.Base(module)).Run() != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// moveGitDir turns the Git directory of the checkout at dir into one at
// to, leaving dir without a .git.
func moveGitDir(t *testing.T, dir, to string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
	require.NoError(t, os.Rename(filepath.Join(dir, ".git"), to))
}

// A ".." after a symbolic link in a path that Git keeps in its own files
// (a .git file's gitdir, a linked worktree's commondir, core.worktree)
// leads where the kernel takes it, to the parent of the link's target, as
// git's realpath and chdir take it; never to the directory the link is in,
// as cleaning the text would. Each layout has a decoy where the text
// leads, so that a textual reading gives another answer than git's.
func TestDotDotAfterALinkInGitsPaths(t *testing.T) {
	t.Run("a .git file", func(t *testing.T) {
		root := tempDir(t)
		// The Git directory git reaches: root/far/real.git, through
		// wt/lnk -> root/far/sub and "..".
		far := filepath.Join(root, "far")
		revFar := initRepo(t, filepath.Join(root, "src-far"), map[string]string{"run_agent.py": "far\n"})
		moveGitDir(t, filepath.Join(root, "src-far"), filepath.Join(far, "real.git"))
		require.NoError(t, os.Mkdir(filepath.Join(far, "sub"), 0o755))
		// The decoy, where the text leads: wt/real.git.
		wt := filepath.Join(root, "wt")
		revDecoy := initRepo(t, wt, map[string]string{"run_agent.py": "decoy\n"})
		require.NotEqual(t, revFar, revDecoy)
		moveGitDir(t, wt, filepath.Join(wt, "real.git"))
		require.NoError(t, os.Symlink(filepath.Join(far, "sub"), filepath.Join(wt, "lnk")))
		writeFile(t, filepath.Join(wt, ".git"), "gitdir: lnk/../real.git\n")

		module := filepath.Join(wt, "run_agent.py")
		require.Equal(t, revFar, gitAnswer(t, wt, module), "git reads the Git directory the kernel reaches")
		c, err := Inspect(module)
		require.NoError(t, err)
		assert.Equal(t, revFar, c.Revision)
		assert.Equal(t, resolved(t, filepath.Join(far, "real.git")), c.GitDir)
		// The link is a dependency: re-pointed, it changes the answer.
		_, deps, err := Read(System, module, true)
		require.NoError(t, err)
		assert.True(t, slices.ContainsFunc(deps, func(d Dep) bool { return d.Path == filepath.Join(resolved(t, wt), "lnk") && d.NoFollow }), "the link is a dependency: %v", deps)
	})

	t.Run("a linked worktree's commondir", func(t *testing.T) {
		root := tempDir(t)
		main := filepath.Join(root, "main")
		initRepo(t, main, map[string]string{"run_agent.py": "x\n"})
		linked := filepath.Join(root, "linked")
		git(t, main, "worktree", "add", "-q", "-b", "wt", linked)
		revMain := commit(t, linked, "run_agent.py", "main's wt\n")
		// Another repository, whose branch wt is elsewhere, with a
		// directory shaped like main's worktrees/linked.
		other := filepath.Join(root, "other")
		git(t, root, "clone", "-q", main, other)
		git(t, other, "branch", "-q", "wt", "origin/main")
		revOther := git(t, other, "rev-parse", "wt")
		require.NotEqual(t, revMain, revOther)
		deeper := filepath.Join(other, ".git", "worktrees", "linked", "deeper")
		require.NoError(t, os.MkdirAll(deeper, 0o755))

		gitDir := filepath.Join(main, ".git", "worktrees", "linked")
		require.NoError(t, os.Symlink(deeper, filepath.Join(gitDir, "lnk")))
		// Kernel: lnk/.. is other/.git/worktrees/linked, ../.. other/.git.
		// Text: gitDir/lnk/../../.. is main/.git.
		writeFile(t, filepath.Join(gitDir, "commondir"), "lnk/../../..\n")

		module := filepath.Join(linked, "run_agent.py")
		require.Equal(t, revOther, gitAnswer(t, linked, module), "git reads the common directory the kernel reaches")
		c, err := Inspect(module)
		require.NoError(t, err)
		assert.Equal(t, revOther, c.Revision)
		assert.Equal(t, resolved(t, filepath.Join(other, ".git")), c.CommonDir)
	})

	t.Run("core.worktree", func(t *testing.T) {
		root := tempDir(t)
		repo := filepath.Join(root, "repo")
		git(t, root, "init", "-q", repo)
		// Kernel: repo/.git/../lnk/.. is repo/a, the worktree repo/a/wt.
		// Text: repo/wt.
		require.NoError(t, os.MkdirAll(filepath.Join(repo, "a", "sub"), 0o755))
		require.NoError(t, os.Symlink(filepath.Join(repo, "a", "sub"), filepath.Join(repo, "lnk")))
		git(t, repo, "config", "core.worktree", "../lnk/../wt")
		wt := filepath.Join(repo, "a", "wt")
		writeFile(t, filepath.Join(wt, "run_agent.py"), "x\n")
		git(t, wt, "add", "run_agent.py")
		git(t, wt, "commit", "-q", "-m", "in the worktree")
		require.NoError(t, os.MkdirAll(filepath.Join(repo, "wt"), 0o755)) // where the text leads

		module := filepath.Join(wt, "run_agent.py")
		rev := gitAnswer(t, wt, module)
		require.NotEmpty(t, rev, "git tracks the module in the worktree the kernel reaches")
		c, err := Inspect(module)
		require.NoError(t, err)
		assert.Equal(t, rev, c.Revision, c.Reason)
		assert.Equal(t, resolved(t, wt), c.TopLevel)

	})
}
