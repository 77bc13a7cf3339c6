//go:build unix

package runtimeguard

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A link on a path Git keeps in its own files, followed by "..", is a
// dependency like a link on the module path: re-pointed to a place whose
// parent holds another Git directory, it moves the checkout, and the next
// check on every path says stale, as git, which now reads the other
// repository, names another revision.
func TestLinkInAGitFileRepointed(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			root := tempDir(t)
			// Two Git directories, far1/real.git and far2/real.git, of
			// checkouts of the same file at two revisions.
			var revs [2]string
			for i, far := range []string{"far1", "far2"} {
				src := filepath.Join(root, "src-"+far)
				revs[i] = initRepo(t, src, map[string]string{"run_agent.py": far + "\n"})
				require.NoError(t, os.MkdirAll(filepath.Join(root, far, "sub"), 0o755))
				require.NoError(t, os.Rename(filepath.Join(src, ".git"), filepath.Join(root, far, "real.git")))
			}
			wt := filepath.Join(root, "wt")
			writeFile(t, filepath.Join(wt, "run_agent.py"), "x\n")
			symlink(t, filepath.Join(root, "far1", "sub"), filepath.Join(wt, "lnk"))
			writeFile(t, filepath.Join(wt, ".git"), "gitdir: lnk/../real.git\n")
			module := filepath.Join(wt, "run_agent.py")

			g := bindFast(t, module, mode.env(t))
			require.Equal(t, revs[0], g.Identity().Revision)
			require.Equal(t, revs[0], git(t, wt, "rev-parse", "HEAD"))
			require.NoError(t, checkWithin(t, g), "the fast path before the change")

			tmp := filepath.Join(wt, "lnk.new")
			symlink(t, filepath.Join(root, "far2", "sub"), tmp)
			require.NoError(t, os.Rename(tmp, filepath.Join(wt, "lnk")))
			require.Equal(t, revs[1], git(t, wt, "rev-parse", "HEAD"), "git reads the other repository")
			for _, when := range []string{"right after the change", "on the next check"} {
				assert.ErrorIs(t, checkWithin(t, g), ErrStale, "%s", when)
			}
		})
	}
}
