//go:build unix

package runtimeguard

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Changes made through another name of what the answer depends on: a link
// to a ref file elsewhere, a .git that is a link, a gitdir reached through
// links, a hard link written in place, a file bind-mounted in place. On
// every path, a check after the change is stale where git sees another
// revision.
func TestChangesThroughOtherNames(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(t *testing.T, dir, store string)
		change func(t *testing.T, dir, store, other string)
	}{
		{"a ref that is a link to a file elsewhere, the file replaced",
			func(t *testing.T, dir, store string) {
				ref := filepath.Join(dir, ".git", "refs", "heads", "main")
				data, err := os.ReadFile(ref)
				require.NoError(t, err)
				writeFile(t, filepath.Join(store, "main"), string(data))
				require.NoError(t, os.Remove(ref))
				symlink(t, filepath.Join(store, "main"), ref)
			},
			func(t *testing.T, dir, store, other string) {
				writeFile(t, filepath.Join(store, "main.new"), other+"\n")
				require.NoError(t, os.Rename(filepath.Join(store, "main.new"), filepath.Join(store, "main")))
			}},
		{"HEAD hard-linked elsewhere, written in place through the other name",
			func(t *testing.T, dir, store string) {
				require.NoError(t, os.Link(filepath.Join(dir, ".git", "HEAD"), filepath.Join(store, "head")))
			},
			func(t *testing.T, dir, store, other string) {
				f, err := os.OpenFile(filepath.Join(store, "head"), os.O_WRONLY|os.O_TRUNC, 0)
				require.NoError(t, err)
				_, err = f.WriteString(other + "\n")
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}},
		{".git a link to a Git directory elsewhere, an ancestor of it swapped",
			func(t *testing.T, dir, store string) {
				require.NoError(t, os.MkdirAll(filepath.Join(store, "a"), 0o755))
				require.NoError(t, os.Rename(filepath.Join(dir, ".git"), filepath.Join(store, "a", "repo.git")))
				symlink(t, filepath.Join(store, "a", "repo.git"), filepath.Join(dir, ".git"))
			},
			func(t *testing.T, dir, store, other string) {
				require.NoError(t, exec.Command("cp", "-a", filepath.Join(store, "a"), filepath.Join(store, "b")).Run())
				writeFile(t, filepath.Join(store, "b", "repo.git", "refs", "heads", "main"), other+"\n")
				require.NoError(t, os.Rename(filepath.Join(store, "a"), filepath.Join(store, "a.old")))
				require.NoError(t, os.Rename(filepath.Join(store, "b"), filepath.Join(store, "a")))
			}},
		{"a gitdir reached through two links, the second re-pointed",
			func(t *testing.T, dir, store string) {
				gitdirs, stage := filepath.Join(store, "gitdirs"), filepath.Join(store, "stage")
				require.NoError(t, os.MkdirAll(gitdirs, 0o755))
				require.NoError(t, os.MkdirAll(stage, 0o755))
				require.NoError(t, os.Rename(filepath.Join(dir, ".git"), filepath.Join(store, "rel1")))
				require.NoError(t, exec.Command("cp", "-a", filepath.Join(store, "rel1"), filepath.Join(store, "rel2")).Run())
				symlink(t, "../rel1", filepath.Join(stage, "live"))
				symlink(t, filepath.Join(stage, "live"), filepath.Join(gitdirs, "current"))
				writeFile(t, filepath.Join(dir, ".git"), "gitdir: "+filepath.Join(gitdirs, "current")+"\n")
			},
			func(t *testing.T, dir, store, other string) {
				writeFile(t, filepath.Join(store, "rel2", "refs", "heads", "main"), other+"\n")
				repoint(t, "../rel2", filepath.Join(store, "stage", "live"))
			}},
	}
	for _, mode := range pathModes {
		for _, tc := range cases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				tmp := tempDir(t)
				dir, store := filepath.Join(tmp, "agent"), filepath.Join(tmp, "store")
				require.NoError(t, os.MkdirAll(store, 0o755))
				module, first := agentRepo(t, dir)
				other := commit(t, dir, "lib.py", "x\n")
				writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "main"), first+"\n")
				tc.setup(t, dir, store)
				require.Equal(t, first, git(t, dir, "rev-parse", "HEAD"))
				g, err := newGuard(Options{ModulePath: module, HomeDir: tmp}, mode.env(t))
				require.NoError(t, err)
				for i := 0; i < 3; i++ {
					require.NoError(t, g.EnsureCurrent())
				}
				if mode.name == "watch" {
					require.True(t, onWatchPath(g))
				}
				tc.change(t, dir, store, other)
				require.Equal(t, other, git(t, dir, "rev-parse", "HEAD"), "git sees the change")
				var se *StaleError
				require.ErrorAs(t, g.EnsureCurrent(), &se)
				assert.Equal(t, other, se.Current)
			})
		}
	}
}

// A file bind-mounted over HEAD, then written in place at its source: on
// every path, the check after the write is stale. (Needs root.)
func TestWriteThroughAFileBindMount(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			tmp := tempDir(t)
			dir := filepath.Join(tmp, "agent")
			module, first := agentRepo(t, dir)
			other := commit(t, dir, "lib.py", "x\n")
			writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "main"), first+"\n")
			src := filepath.Join(tmp, "head")
			writeFile(t, src, "ref: refs/heads/main\n")
			head := filepath.Join(dir, ".git", "HEAD")
			if out, err := exec.Command("mount", "--bind", src, head).CombinedOutput(); err != nil {
				t.Skipf("cannot bind-mount here (needs root and mount(8)): %v: %s", err, out)
			}
			defer exec.Command("umount", head).Run()
			g, err := newGuard(Options{ModulePath: module, HomeDir: tmp}, mode.env(t))
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				require.NoError(t, g.EnsureCurrent())
			}
			f, err := os.OpenFile(src, os.O_WRONLY|os.O_TRUNC, 0)
			require.NoError(t, err)
			_, err = f.WriteString(other + "\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.Equal(t, other, git(t, dir, "rev-parse", "HEAD"))
			assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		})
	}
}

// A file system mounted over the module's directory takes the module out
// of the worktree, as git stops at the mount point: the check is stale.
// (Needs root.)
func TestMountOverTheModulesDirectory(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			tmp := tempDir(t)
			dir := filepath.Join(tmp, "agent")
			initRepo(t, dir, map[string]string{"pkg/run_agent.py": "x = 1\n"})
			module := filepath.Join(dir, "pkg", "run_agent.py")
			g, err := newGuard(Options{ModulePath: module, HomeDir: tmp}, mode.env(t))
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				require.NoError(t, g.EnsureCurrent())
			}
			pkg := filepath.Join(dir, "pkg")
			if out, err := exec.Command("mount", "-t", "tmpfs", "none", pkg).CombinedOutput(); err != nil {
				t.Skipf("cannot mount here (needs root and mount(8)): %v: %s", err, out)
			}
			defer exec.Command("umount", pkg).Run()
			writeFile(t, module, "x = 2\n")
			_, _, _, ok := gitVerdict(t, module)
			require.False(t, ok, "git finds no repository across the mount point")
			assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		})
	}
}
