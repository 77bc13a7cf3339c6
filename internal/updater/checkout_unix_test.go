//go:build unix

package updater

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// commonDir is git's own answer for the directory dir: git rev-parse
// --git-common-dir, absolute and its links resolved; "" where git finds
// no repository.
func commonDir(t *testing.T, dir string) string {
	t.Helper()
	out, err := gittest.Command(dir, "rev-parse", "--path-format=absolute", "--git-common-dir").CombinedOutput()
	if err != nil {
		require.Contains(t, string(out), "not a git repository", "git rev-parse in %s", dir)
		return ""
	}
	return gittest.Resolved(t, strings.TrimSpace(string(out)))
}

// The checkout lock is found as git finds the repository, in every layout
// of a checkout: where git rev-parse --git-common-dir, run in the install
// root, names the common Git directory, the lock is in it; where git finds
// no repository, it is <root>/.hermes-update.lock. Where Hermes's own
// updater, which reads only <install root>/.git and joins what it names
// by text, locks another file, that file is the other one a reader probes
// (Also).
func TestFindCheckoutLockAsGitFindsTheRepository(t *testing.T) {
	gittest.Need(t)
	cases := []struct {
		name string
		// make builds the layout in tmp and returns the install root, and
		// where Hermes's updater locks it where that is another file than
		// git's ("" where it is the same).
		make func(t *testing.T, tmp string) (root, hermes string)
	}{
		{"a plain checkout", func(t *testing.T, tmp string) (string, string) {
			repo := filepath.Join(tmp, "repo")
			gittest.Agent(t, repo)
			return repo, ""
		}},
		{"an install root below the top level (Hermes in a folder of a larger repository)", func(t *testing.T, tmp string) (string, string) {
			repo := filepath.Join(tmp, "mono")
			gittest.Init(t, repo, map[string]string{"hermes-agent/run_agent.py": "x\n"})
			root := filepath.Join(repo, "hermes-agent")
			return root, filepath.Join(root, ".hermes-update.lock")
		}},
		{"a linked worktree, its gitdir absolute", func(t *testing.T, tmp string) (string, string) {
			main := filepath.Join(tmp, "main")
			gittest.Agent(t, main)
			gittest.Git(t, main, "worktree", "add", "-q", filepath.Join(tmp, "wt"))
			return filepath.Join(tmp, "wt"), ""
		}},
		{"a linked worktree, its gitdir relative", func(t *testing.T, tmp string) (string, string) {
			main := filepath.Join(tmp, "main")
			gittest.Agent(t, main)
			wt := filepath.Join(tmp, "wt")
			gittest.Git(t, main, "worktree", "add", "-q", wt)
			writeFile(t, filepath.Join(wt, ".git"), "gitdir: ../main/.git/worktrees/wt\n")
			return wt, ""
		}},
		{"a linked worktree whose gitdir names its Git directory through a link", func(t *testing.T, tmp string) (string, string) {
			main := filepath.Join(tmp, "main")
			gittest.Agent(t, main)
			wt := filepath.Join(tmp, "wt")
			gittest.Git(t, main, "worktree", "add", "-q", wt)
			require.NoError(t, os.Symlink(filepath.Join(main, ".git", "worktrees", "wt"), filepath.Join(tmp, "wtadmin")))
			writeFile(t, filepath.Join(wt, ".git"), "gitdir: "+filepath.Join(tmp, "wtadmin")+"\n")
			// commondir says ../..: by text, from the link's name.
			return wt, filepath.Join(filepath.Dir(tmp), HermesCheckoutLock)
		}},
		{"a linked worktree whose relative gitdir goes .. after a link", func(t *testing.T, tmp string) (string, string) {
			main := filepath.Join(tmp, "deep", "main")
			gittest.Agent(t, main)
			wt := filepath.Join(tmp, "wt")
			gittest.Git(t, main, "worktree", "add", "-q", wt)
			require.NoError(t, os.Symlink(filepath.Join(main, ".git", "worktrees"), filepath.Join(tmp, "l")))
			writeFile(t, filepath.Join(wt, ".git"), "gitdir: ../l/wt\n")
			// wt/../l/wt/../.., by text: tmp.
			return wt, filepath.Join(tmp, HermesCheckoutLock)
		}},
		{"a submodule", func(t *testing.T, tmp string) (string, string) {
			sub, super := filepath.Join(tmp, "upstream"), filepath.Join(tmp, "super")
			gittest.Agent(t, sub)
			gittest.Init(t, super, map[string]string{"README": "x\n"})
			gittest.Git(t, super, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "agent")
			return filepath.Join(super, "agent"), ""
		}},
		{"core.worktree set in a Git directory above the worktree", func(t *testing.T, tmp string) (string, string) {
			top := filepath.Join(tmp, "top")
			wt := filepath.Join(top, "wt")
			require.NoError(t, os.MkdirAll(wt, 0o755))
			gittest.Git(t, top, "init", "-q")
			gittest.Git(t, top, "config", "core.worktree", "../wt")
			writeFile(t, filepath.Join(wt, "run_agent.py"), "x\n")
			gittest.Git(t, wt, "add", "run_agent.py")
			gittest.Git(t, wt, "commit", "-qm", "one")
			return wt, filepath.Join(wt, ".hermes-update.lock")
		}},
		{"core.worktree set in a Git directory a gitdir file names", func(t *testing.T, tmp string) (string, string) {
			wt := filepath.Join(tmp, "wt")
			gittest.Git(t, tmp, "init", "-q", "--separate-git-dir", filepath.Join(tmp, "store.git"), wt)
			gittest.Git(t, wt, "config", "core.worktree", wt)
			return wt, ""
		}},
		{"a stray empty .git in the install root of a larger repository, which git passes over", func(t *testing.T, tmp string) (string, string) {
			repo := filepath.Join(tmp, "repo")
			gittest.Init(t, repo, map[string]string{"sub/run_agent.py": "x\n"})
			require.NoError(t, os.Mkdir(filepath.Join(repo, "sub", ".git"), 0o755))
			return filepath.Join(repo, "sub"), filepath.Join(repo, "sub", ".git", HermesCheckoutLock)
		}},
		{"a .git that links to a gitdir file", func(t *testing.T, tmp string) (string, string) {
			main := filepath.Join(tmp, "main")
			gittest.Agent(t, main)
			wt := filepath.Join(tmp, "wt")
			gittest.Git(t, main, "worktree", "add", "-q", wt)
			require.NoError(t, os.Rename(filepath.Join(wt, ".git"), filepath.Join(tmp, "wt.gitfile")))
			require.NoError(t, os.Symlink(filepath.Join(tmp, "wt.gitfile"), filepath.Join(wt, ".git")))
			return wt, ""
		}},
		{"a .git that links to a Git directory", func(t *testing.T, tmp string) (string, string) {
			repo := filepath.Join(tmp, "repo")
			gittest.Agent(t, repo)
			require.NoError(t, os.Rename(filepath.Join(repo, ".git"), filepath.Join(tmp, "store")))
			require.NoError(t, os.Symlink(filepath.Join(tmp, "store"), filepath.Join(repo, ".git")))
			return repo, "" // the same file, through the link
		}},
		{"an install without .git", func(t *testing.T, tmp string) (string, string) {
			root := filepath.Join(tmp, "install")
			writeFile(t, filepath.Join(root, "run_agent.py"), "x\n")
			return root, ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // repositories of its own
			tmp := gittest.Resolved(t, tempDir(t))
			root, hermes := tc.make(t, tmp)
			common := commonDir(t, root)
			want := CheckoutLockPaths{Path: filepath.Join(common, HermesCheckoutLock), Also: hermes}
			if common == "" {
				want.Path = filepath.Join(root, "."+HermesCheckoutLock)
			}
			got, err := FindCheckoutLock(root, HermesCheckoutLock)
			require.NoError(t, err)
			// The same directory, named through a link or not.
			got.Path = filepath.Join(gittest.Resolved(t, filepath.Dir(got.Path)), filepath.Base(got.Path))
			assert.Equal(t, want, got, "git rev-parse --git-common-dir in %s says %q", root, common)
		})
	}
}

// A repository git cannot read names no lock: an error, never a guess
// (the guard then says the lock is unknown, and plans nothing).
func TestFindCheckoutLockOfARepositoryGitCannotRead(t *testing.T) {
	gittest.Need(t)
	tmp := tempDir(t)
	root := filepath.Join(tmp, "wt")
	require.NoError(t, os.MkdirAll(root, 0o755))
	writeFile(t, filepath.Join(root, ".git"), "gitdir: "+filepath.Join(tmp, "nowhere")+"\n")
	_, err := gittest.Command(root, "rev-parse", "--git-common-dir").CombinedOutput()
	require.Error(t, err, "git reads it")
	_, err = FindCheckoutLock(root, HermesCheckoutLock)
	assert.Error(t, err)
}

// The probe of the checkout lock never opens a link at the lock's name:
// a link there proves nothing (unknown), even to a lock another holds;
// only the updater's own path (Also) is probed through a link, as the
// updater opens it.
func TestProbeCheckoutLockOfALink(t *testing.T) {
	path := filepath.Join(tempDir(t), "hermes-update.lock")
	target := linkAt(t, path, false)
	holder, err := Lock("", target, true)
	require.NoError(t, err)
	defer holder.Close()
	state, why := ProbeCheckoutLock(path, false)
	assert.Equal(t, LockUnknown, state, why)
	state, why = ProbeCheckoutLock(path, true)
	assert.Equal(t, LockHeld, state, why)
	untouched(t, target, false)
}
