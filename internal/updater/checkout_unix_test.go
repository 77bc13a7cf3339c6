//go:build unix

package updater

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The checkout lock's path is read from the files as the updater reads
// them, links followed: a .git, a gitdir file and a commondir file reached
// through a link name the same common Git directory as the files
// themselves, and a commondir that is no regular file names none.
func TestCheckoutLockPathThroughLinks(t *testing.T) {
	tmp := tempDir(t)
	common := filepath.Join(tmp, "main", ".git")
	gitdir := filepath.Join(common, "worktrees", "wt")
	require.NoError(t, os.MkdirAll(gitdir, 0o755))
	want := filepath.Join(common, HermesCheckoutLock)
	cases := map[string]func(t *testing.T, root string){
		"a .git file": func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, ".git"), "gitdir: "+gitdir+"\n")
		},
		"a .git that links to a gitdir file": func(t *testing.T, root string) {
			file := filepath.Join(tmp, filepath.Base(root)+".gitfile")
			writeFile(t, file, "gitdir: "+gitdir+"\n")
			require.NoError(t, os.Symlink(file, filepath.Join(root, ".git")))
		},
		"a .git that links to a link to a gitdir file": func(t *testing.T, root string) {
			file := filepath.Join(tmp, filepath.Base(root)+".gitfile")
			writeFile(t, file, "gitdir: "+gitdir+"\n")
			require.NoError(t, os.Symlink(file, file+".link"))
			require.NoError(t, os.Symlink(file+".link", filepath.Join(root, ".git")))
		},
	}
	writeFile(t, filepath.Join(gitdir, "commondir"), "../..\n")
	for name, make := range cases {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(tmp, name)
			require.NoError(t, os.MkdirAll(root, 0o755))
			make(t, root)
			assert.Equal(t, want, CheckoutLockPath(root, HermesCheckoutLock))
		})
	}

	t.Run("a commondir that is a link", func(t *testing.T) {
		other := filepath.Join(tmp, "linked", "gitdir")
		require.NoError(t, os.MkdirAll(other, 0o755))
		writeFile(t, filepath.Join(tmp, "linked", "commondir.real"), common+"\n")
		require.NoError(t, os.Symlink(filepath.Join(tmp, "linked", "commondir.real"), filepath.Join(other, "commondir")))
		root := filepath.Join(tmp, "linked", "root")
		require.NoError(t, os.MkdirAll(root, 0o755))
		writeFile(t, filepath.Join(root, ".git"), "gitdir: "+other+"\n")
		assert.Equal(t, want, CheckoutLockPath(root, HermesCheckoutLock))
	})
	t.Run("a commondir that is a directory", func(t *testing.T) {
		other := filepath.Join(tmp, "dircommon", "gitdir")
		require.NoError(t, os.MkdirAll(filepath.Join(other, "commondir"), 0o755))
		root := filepath.Join(tmp, "dircommon", "root")
		require.NoError(t, os.MkdirAll(root, 0o755))
		writeFile(t, filepath.Join(root, ".git"), "gitdir: "+other+"\n")
		assert.Equal(t, filepath.Join(other, HermesCheckoutLock), CheckoutLockPath(root, HermesCheckoutLock))
	})
}
