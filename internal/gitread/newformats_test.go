package gitread

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// What gits newer than the distribution's write, made by a current git
// and read as it reads it: the reader agrees with git rev-parse HEAD and
// git ls-files in the module's directory, or refuses the format.

// currentAgrees checks that the reader gives what the git at gitPath
// gives for module: HEAD's revision, tracked.
func currentAgrees(t *testing.T, gitPath, module, what string) string {
	t.Helper()
	dir := filepath.Dir(module)
	rev := gittest.GitWith(t, gitPath, dir, "rev-parse", "--verify", "HEAD")
	gittest.GitWith(t, gitPath, dir, "ls-files", "--error-unmatch", "--", filepath.Base(module))
	got, err := readRevision(module)
	require.NoError(t, err, what)
	assert.Equal(t, rev, got, what)
	return rev
}

// Linked worktrees with relative paths (git 2.48): extensions.relativeWorktrees
// in the repository's config, a relative gitdir in the worktree's .git file
// and in the Git directory's gitdir file. Made by --relative-paths and by
// worktree.useRelativePaths; the whole layout moved elsewhere still reads,
// as it does for git.
func TestRelativeWorktreesOfCurrentGit(t *testing.T) {
	cur := gittest.Current(t, 2, 48)
	for _, how := range []string{"--relative-paths", "worktree.useRelativePaths"} {
		t.Run(how, func(t *testing.T) {
			root := tempDir(t)
			main := filepath.Join(root, "layout", "main")
			initRepo(t, main, map[string]string{"run_agent.py": "x\n"})
			linked := filepath.Join(root, "layout", "linked")
			if how == "--relative-paths" {
				gittest.GitWith(t, cur, main, "worktree", "add", "-q", "--relative-paths", "-b", "wt", linked)
			} else {
				gittest.GitWith(t, cur, main, "config", "worktree.useRelativePaths", "true")
				gittest.GitWith(t, cur, main, "worktree", "add", "-q", "-b", "wt", linked)
			}
			config, err := os.ReadFile(filepath.Join(main, ".git", "config"))
			require.NoError(t, err)
			require.Contains(t, strings.ToLower(string(config)), "relativeworktrees = true", "%s writes the extension", cur)
			dotgit, err := os.ReadFile(filepath.Join(linked, ".git"))
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(string(dotgit), "gitdir: ../"), "a relative gitdir: %q", dotgit)

			module := filepath.Join(linked, "run_agent.py")
			first := currentAgrees(t, cur, module, "the linked worktree")
			currentAgrees(t, cur, filepath.Join(main, "run_agent.py"), "the main worktree")
			gittest.WriteFile(t, module, "y\n")
			gittest.GitWith(t, cur, linked, "commit", "-q", "-am", "in the linked worktree")
			assert.NotEqual(t, first, currentAgrees(t, cur, module, "after a commit in the linked worktree"))

			moved := filepath.Join(root, "moved")
			require.NoError(t, os.Rename(filepath.Join(root, "layout"), moved))
			currentAgrees(t, cur, filepath.Join(moved, "linked", "run_agent.py"), "the layout moved")
		})
	}
}

// extensions.submodulePathConfig (git 2.54), set by git init under
// init.defaultSubmodulePathConfig: it says where a superproject finds its
// submodules' Git directories, nothing of HEAD, the refs or the index; a
// submodule's own .git file still names its Git directory.
func TestSubmodulePathConfigOfCurrentGit(t *testing.T) {
	cur := gittest.Current(t, 2, 54)
	root := tempDir(t)
	sub := filepath.Join(root, "sub")
	initRepo(t, sub, map[string]string{"lib.py": "x\n"})
	super := filepath.Join(root, "super")
	require.NoError(t, os.MkdirAll(super, 0o755))
	gittest.GitWith(t, cur, super, "-c", "init.defaultSubmodulePathConfig=true", "init", "-q")
	config, err := os.ReadFile(filepath.Join(super, ".git", "config"))
	require.NoError(t, err)
	require.Contains(t, strings.ToLower(string(config)), "submodulepathconfig = true", "%s writes the extension", cur)
	gittest.WriteFile(t, filepath.Join(super, "run_agent.py"), "x\n")
	gittest.GitWith(t, cur, super, "add", "run_agent.py")
	gittest.GitWith(t, cur, super, "submodule", "add", "-q", sub, "vendor/sub")
	gittest.GitWith(t, cur, super, "commit", "-q", "-m", "with a submodule")
	currentAgrees(t, cur, filepath.Join(super, "run_agent.py"), "the superproject")
	currentAgrees(t, cur, filepath.Join(super, "vendor", "sub", "lib.py"), "the submodule")
}

// extensions.refStorage with a payload (files://PATH, git 2.54, written by
// git init under GIT_REFERENCE_BACKEND): the refs live in PATH, and the
// Git directory holds stubs (HEAD names refs/heads/.invalid). Not read:
// refused as unsupported, never answered from the stubs.
func TestRefStorageElsewhereOfCurrentGit(t *testing.T) {
	cur := gittest.Current(t, 2, 54)
	root := tempDir(t)
	refs := filepath.Join(root, "refs-elsewhere")
	require.NoError(t, os.Mkdir(refs, 0o755))
	repo := filepath.Join(root, "repo")
	cmd := gittest.CommandWith(cur, root, "init", "-q", repo)
	cmd.Env = append(cmd.Env, "GIT_REFERENCE_BACKEND=files://"+refs)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	config, err := os.ReadFile(filepath.Join(repo, ".git", "config"))
	require.NoError(t, err)
	require.Contains(t, string(config), "files://", "%s writes the payload", cur)
	gittest.WriteFile(t, filepath.Join(repo, "run_agent.py"), "x\n")
	gittest.GitWith(t, cur, repo, "add", "run_agent.py")
	gittest.GitWith(t, cur, repo, "commit", "-q", "-m", "refs elsewhere")
	require.NotEmpty(t, gittest.GitWith(t, cur, repo, "rev-parse", "HEAD"))
	got, err := readRevision(filepath.Join(repo, "run_agent.py"))
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Empty(t, got)
}

// A repository migrated from reftable to the files backend by git refs
// migrate (git 2.46) is a files repository like any other.
func TestRefsMigratedToFilesByCurrentGit(t *testing.T) {
	cur := gittest.Current(t, 2, 46)
	repo := filepath.Join(tempDir(t), "repo")
	gittest.GitWith(t, cur, filepath.Dir(repo), "init", "-q", "--ref-format=reftable", repo)
	gittest.WriteFile(t, filepath.Join(repo, "run_agent.py"), "x\n")
	gittest.GitWith(t, cur, repo, "add", "run_agent.py")
	gittest.GitWith(t, cur, repo, "commit", "-q", "-m", "in reftable")
	gittest.GitWith(t, cur, repo, "branch", "other")
	gittest.GitWith(t, cur, repo, "refs", "migrate", "--ref-format=files")
	currentAgrees(t, cur, filepath.Join(repo, "run_agent.py"), "migrated to files")
}

// extensions.compatObjectFormat (git 2.45 and later built with the
// compatibility code): the object format of the ids HEAD and the index
// hold is still objectFormat. A git that cannot write it says so, and the
// test says why it is skipped.
func TestCompatObjectFormatOfCurrentGit(t *testing.T) {
	cur := gittest.Current(t, 2, 45)
	repo := filepath.Join(tempDir(t), "repo")
	gittest.GitWith(t, cur, filepath.Dir(repo), "init", "-q", "--object-format=sha256", repo)
	gittest.GitWith(t, cur, repo, "config", "extensions.compatObjectFormat", "sha1")
	gittest.WriteFile(t, filepath.Join(repo, "run_agent.py"), "x\n")
	if out, err := gittest.CommandWith(cur, repo, "add", "run_agent.py").CombinedOutput(); err != nil {
		t.Skipf("%s cannot write a repository with compatObjectFormat: %s", cur, strings.TrimSpace(string(out)))
	}
	gittest.GitWith(t, cur, repo, "commit", "-q", "-m", "with a compatibility format")
	currentAgrees(t, cur, filepath.Join(repo, "run_agent.py"), "compatObjectFormat sha1")
}
