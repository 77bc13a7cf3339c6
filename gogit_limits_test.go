//go:build unix

package runtimeguard

import (
	"os"
	"path/filepath"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGoGitLimits pins what the README says of go-git's repository and index
// readers, the reasons this package reads HEAD, refs and the index itself.
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
}
