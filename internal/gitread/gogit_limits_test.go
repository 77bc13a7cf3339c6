//go:build unix

package gitread

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
)

// TestGoGitLimits pins what the README says of go-git's repository, index
// and config readers, the reasons this package reads HEAD, refs, the index
// and the config itself.
// When a go-git upgrade changes one of these, this test says so.
func TestGoGitLimits(t *testing.T) {
	t.Run("refuses worktreeConfig", func(t *testing.T) {
		dir := tempDir(t)
		initRepo(t, dir, map[string]string{"run_agent.py": "x\n"})
		git(t, dir, "sparse-checkout", "init", "--cone")
		_, err := gogit.PlainOpen(dir)
		assert.Error(t, err, "go-git opened a repository with extensions.worktreeConfig")
	})
	t.Run("refuses sha256", func(t *testing.T) {
		dir := tempDir(t)
		initRepo(t, dir, map[string]string{"run_agent.py": "x\n"}, "--object-format=sha256")
		_, err := gogit.PlainOpen(dir)
		assert.Error(t, err, "go-git opened a SHA-256 repository")
	})
	t.Run("refuses a sparse index", func(t *testing.T) {
		dir := tempDir(t)
		initRepo(t, dir, map[string]string{"run_agent.py": "x\n", "docs/a.txt": "y\n"})
		git(t, dir, "sparse-checkout", "set", "--cone", "--sparse-index", "src")
		f, err := os.Open(filepath.Join(dir, ".git", "index"))
		require.NoError(t, err)
		defer f.Close()
		var idx index.Index
		assert.ErrorIs(t, index.NewDecoder(f).Decode(&idx), index.ErrUnknownExtension)
	})
	t.Run("config decoder refuses configs git reads", func(t *testing.T) {
		for _, tc := range configsGitReads {
			path := filepath.Join(tempDir(t), "config")
			require.NoError(t, os.WriteFile(path, []byte(tc.config), 0o644))
			_, ok := gitConfigList(t, path)
			require.True(t, ok, "git config --file F --list reads the %s", tc.name)
			err := gitconfig.NewDecoder(bytes.NewReader([]byte(tc.config))).Decode(gitconfig.New())
			assert.Error(t, err, "go-git's config decoder read the %s", tc.name)
		}
	})
}
