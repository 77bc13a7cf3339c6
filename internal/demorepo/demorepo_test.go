package demorepo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// TestGitReadsWhatItWrites: what the package writes is a repository git
// checks strictly and agrees with, commit for commit, and the guard's
// reader binds to the revision git names.
func TestGitReadsWhatItWrites(t *testing.T) {
	gittest.Need(t)
	dir := filepath.Join(gittest.TempDir(t), "agent")
	repo, err := Open(dir)
	require.NoError(t, err)
	first, err := repo.Commit("run_agent.py", "class AIAgent: pass\n", "agent as loaded")
	require.NoError(t, err)
	_, err = repo.Commit("README", "an agent\n", "readme")
	require.NoError(t, err)

	// A second Open reads the branch back: the commits chain and the tree
	// keeps the files of the commits before.
	again, err := Open(dir)
	require.NoError(t, err)
	last, err := again.Commit("run_agent.py", "class AIAgent: revision = 2\n", "agent update\n")
	require.NoError(t, err)

	gittest.Git(t, dir, "fsck", "--strict", "--no-dangling")
	assert.Equal(t, last, gittest.Git(t, dir, "rev-parse", "--verify", "HEAD"))
	assert.Equal(t, "main", gittest.Git(t, dir, "symbolic-ref", "--short", "HEAD"))
	assert.Equal(t, first, gittest.Git(t, dir, "rev-parse", "--verify", "HEAD~2"))
	assert.Equal(t, "agent update\nreadme\nagent as loaded", gittest.Git(t, dir, "log", "--format=%s"))
	assert.Equal(t, Author+"\n"+Author+"\n"+Author, gittest.Git(t, dir, "log", "--format=%an <%ae>"))
	for _, name := range []string{"run_agent.py", "README"} {
		gittest.Git(t, dir, "--literal-pathspecs", "ls-files", "--error-unmatch", "--", name)
	}
	assert.Equal(t, "README\nrun_agent.py", gittest.Git(t, dir, "ls-tree", "--name-only", "HEAD"))
	// The index names the blobs of HEAD's tree: nothing is staged.
	assert.Equal(t, gittest.Git(t, dir, "ls-tree", "-r", "HEAD", "--format=%(objectmode) %(objectname) 0\t%(path)"),
		gittest.Git(t, dir, "ls-files", "--stage"))
	gittest.Git(t, dir, "diff", "--cached", "--quiet")
	gittest.Git(t, dir, "diff", "--quiet")
	assert.Empty(t, gittest.Git(t, dir, "status", "--porcelain", "--untracked-files=all"))
	assert.Equal(t, "class AIAgent: revision = 2", gittest.Git(t, dir, "show", "HEAD:run_agent.py"))

	module := filepath.Join(dir, "run_agent.py")
	rev, err := inspectRevision(module)
	require.NoError(t, err)
	assert.Equal(t, last, rev)
}

// TestSameObjectsAsGit: a commit of the same file, message, author and time
// made by git has the same id, so blob, tree and commit are byte for byte
// what git writes.
func TestSameObjectsAsGit(t *testing.T) {
	gittest.Need(t)
	ours := filepath.Join(gittest.TempDir(t), "ours")
	repo, err := Open(ours)
	require.NoError(t, err)
	id, err := repo.Commit("run_agent.py", "class AIAgent: pass\n", "agent as loaded")
	require.NoError(t, err)
	when := gittest.Git(t, ours, "log", "-1", "--format=%at")

	theirs := filepath.Join(gittest.TempDir(t), "theirs")
	gittest.Git(t, filepath.Dir(theirs), "init", "-q", theirs)
	gittest.WriteFile(t, filepath.Join(theirs, "run_agent.py"), "class AIAgent: pass\n")
	gittest.Git(t, theirs, "add", "run_agent.py")
	name, email, _ := strings.Cut(strings.TrimSuffix(Author, ">"), " <")
	cmd := gittest.Command(theirs, "commit", "-q", "-m", "agent as loaded")
	cmd.Env = append(cmd.Env,
		"GIT_AUTHOR_NAME="+name, "GIT_AUTHOR_EMAIL="+email, "GIT_AUTHOR_DATE=@"+when+" +0000",
		"GIT_COMMITTER_NAME="+name, "GIT_COMMITTER_EMAIL="+email, "GIT_COMMITTER_DATE=@"+when+" +0000")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, gittest.Git(t, theirs, "rev-parse", "HEAD"), id)
}

func TestRefusesNames(t *testing.T) {
	repo, err := Open(gittest.TempDir(t))
	require.NoError(t, err)
	for _, name := range []string{"", ".", "..", ".git", "a/b", `a\b`, "a\x00b"} {
		_, err := repo.Commit(name, "x", "m")
		assert.Error(t, err, "Commit(%q)", name)
	}
}

// TestOpensOnlyItsOwn: a repository whose HEAD is not the branch main is
// refused, not overwritten.
func TestOpensOnlyItsOwn(t *testing.T) {
	dir := gittest.TempDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref: refs/heads/trunk\n"), 0o644))
	_, err := Open(dir)
	assert.ErrorContains(t, err, "not the branch main")
}

// inspectRevision is the revision gitread.Inspect finds for module.
func inspectRevision(module string) (string, error) {
	c, err := gitread.Inspect(module)
	return c.Revision, err
}
