//go:build unix

package runtimeguard

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
)

// With core.preferSymlinkRefs, git writes symbolic refs as symbolic links
// whose text is the target ref. The guard reads them as git does, for HEAD
// and for refs, loose and packed.
func TestSymbolicRefsStoredAsLinks(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"HEAD a link", func(t *testing.T, dir string) {
			git(t, dir, "symbolic-ref", "HEAD", "refs/heads/main")
		}},
		{"HEAD a link to a branch that is a link", func(t *testing.T, dir string) {
			git(t, dir, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
			git(t, dir, "symbolic-ref", "HEAD", "refs/heads/alias")
		}},
		{"HEAD a link, the branch packed", func(t *testing.T, dir string) {
			git(t, dir, "symbolic-ref", "HEAD", "refs/heads/main")
			git(t, dir, "pack-refs", "--all")
		}},
		{"HEAD a link to an alias link, the branch packed", func(t *testing.T, dir string) {
			git(t, dir, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
			git(t, dir, "symbolic-ref", "HEAD", "refs/heads/alias")
			git(t, dir, "pack-refs", "--all")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(tempDir(t), "agent")
			module, rev := agentRepo(t, dir)
			git(t, dir, "config", "core.preferSymlinkRefs", "true")
			tc.setup(t, dir)
			fi, err := os.Lstat(filepath.Join(dir, ".git", "HEAD"))
			require.NoError(t, err)
			require.Equal(t, os.ModeSymlink, fi.Mode().Type(), "git wrote HEAD as a link")
			require.Equal(t, rev, git(t, dir, "rev-parse", "HEAD"))

			for _, e := range []*env{settledEnv(), testEnv(nil)} {
				g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
				require.NoError(t, err)
				assert.Equal(t, rev, g.Identity().Revision, "the bound revision")
				require.NoError(t, checkWithin(t, g))
				require.NoError(t, checkWithin(t, g))
				defer func(g *Guard) {
					assert.ErrorIs(t, checkWithin(t, g), ErrStale, "after a commit")
				}(g)
			}
			c, err := gitread.Inspect(module)
			require.NoError(t, err)
			assert.Equal(t, rev, c.Revision, "Inspect")
			head, err := os.Readlink(filepath.Join(dir, ".git", "HEAD"))
			require.NoError(t, err)
			assert.Equal(t, head, c.Head, "Inspect: the ref HEAD names")
			commit(t, dir, "run_agent.py", "moved\n")
			require.NotEqual(t, rev, git(t, dir, "rev-parse", "HEAD"))
		})
	}
}

// A symbolic link at a ref path whose text is not a ref name is followed
// and read as a file, as git does; links that loop fail closed.
func TestRefLinksThatAreNotRefNames(t *testing.T) {
	dir := filepath.Join(tempDir(t), "agent")
	module, rev := agentRepo(t, dir)
	elsewhere := filepath.Join(tempDir(t), "main-ref")
	writeFile(t, elsewhere, rev+"\n")
	ref := filepath.Join(dir, ".git", "refs", "heads", "main")
	require.NoError(t, os.Remove(ref))
	symlink(t, elsewhere, ref)
	require.Equal(t, rev, git(t, dir, "rev-parse", "HEAD"))

	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, settledEnv())
	require.NoError(t, err)
	assert.Equal(t, rev, g.Identity().Revision)
	require.NoError(t, checkWithin(t, g))

	// The file the link leads to moves: so does HEAD.
	other := commit(t, dir, "lib.py", "z\n")
	require.Equal(t, other, git(t, dir, "rev-parse", "HEAD"))
	assert.ErrorIs(t, checkWithin(t, g), ErrStale)

	// HEAD as a link loop is no revision.
	head := filepath.Join(dir, ".git", "HEAD")
	require.NoError(t, os.Remove(head))
	symlink(t, "HEAD", head)
	assert.ErrorIs(t, checkWithin(t, g), ErrStale)
}
