//go:build unix

package gogitcompare

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/plumbing/format/config"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// gitInitConfig is the config git init writes.
const gitInitConfig = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"

// configsGitReads are repository configs that git reads and go-git's config
// decoder refuses.
var configsGitReads = []struct{ name, config string }{
	{"legacy [remote.origin] section", gitInitConfig + "[remote.origin]\n\turl = https://example.invalid/agent.git\n"},
	{"key on the section header line", gitInitConfig + "[user] name = x\n"},
	{"UTF-8 byte order mark", "\ufeff" + gitInitConfig},
	{"[core] repositoryformatversion = 0 on one line", "[core] repositoryformatversion = 0\n"},
}

// TestGoGitLimits pins what the README says of go-git's repository, index
// and config readers, the reasons runtimeguard reads HEAD, refs, the index
// and the config itself: each case is a repository git reads, that the
// guard's reader binds to at the revision git names, and that go-git
// refuses. When a go-git upgrade changes one of these, this test says so.
func TestGoGitLimits(t *testing.T) {
	gittest.Need(t)
	t.Run("refuses worktreeConfig", func(t *testing.T) {
		dir := gittest.TempDir(t)
		module, _ := gittest.Agent(t, dir)
		gittest.Git(t, dir, "sparse-checkout", "init", "--cone")
		assertGuardReads(t, dir, module)
		_, err := gogit.PlainOpen(dir)
		assert.Error(t, err, "go-git opened a repository with extensions.worktreeConfig")
	})
	t.Run("refuses sha256", func(t *testing.T) {
		dir := gittest.TempDir(t)
		gittest.Init(t, dir, map[string]string{"run_agent.py": "x\n"}, "--object-format=sha256")
		assertGuardReads(t, dir, filepath.Join(dir, "run_agent.py"))
		_, err := gogit.PlainOpen(dir)
		assert.Error(t, err, "go-git opened a SHA-256 repository")
	})
	t.Run("refuses a sparse index", func(t *testing.T) {
		dir := gittest.TempDir(t)
		gittest.Init(t, dir, map[string]string{"run_agent.py": "x\n", "docs/a.txt": "y\n"})
		gittest.Git(t, dir, "sparse-checkout", "set", "--cone", "--sparse-index", "src")
		assertGuardReads(t, dir, filepath.Join(dir, "run_agent.py"))
		f, err := os.Open(filepath.Join(dir, ".git", "index"))
		require.NoError(t, err)
		defer f.Close()
		var idx index.Index
		assert.ErrorIs(t, index.NewDecoder(f).Decode(&idx), index.ErrUnknownExtension)
	})
	t.Run("config decoder refuses configs git reads", func(t *testing.T) {
		for _, tc := range configsGitReads {
			dir := gittest.TempDir(t)
			module, _ := gittest.Agent(t, dir)
			gittest.WriteFile(t, filepath.Join(dir, ".git", "config"), tc.config)
			path := filepath.Join(dir, ".git", "config")
			out, err := gittest.Command(dir, "config", "--file", path, "--list").CombinedOutput()
			require.NoError(t, err, "git config --file F --list reads the %s: %s", tc.name, out)
			assertGuardReads(t, dir, module)
			err = gitconfig.NewDecoder(bytes.NewReader([]byte(tc.config))).Decode(gitconfig.New())
			assert.Error(t, err, "go-git's config decoder read the %s", tc.name)
		}
	})
}

// assertGuardReads checks that the guard's reader gives the revision git
// rev-parse HEAD gives for the checkout at dir.
func assertGuardReads(t *testing.T, dir, module string) {
	t.Helper()
	want := gittest.Git(t, dir, "rev-parse", "--verify", "HEAD")
	got, err := inspectRevision(module)
	require.NoError(t, err, "Inspect(%q)", module)
	assert.Equal(t, want, got, "Inspect(%q)", module)
}

// inspectRevision is the revision gitread.Inspect finds for module.
func inspectRevision(module string) (string, error) {
	c, err := gitread.Inspect(module)
	return c.Revision, err
}
