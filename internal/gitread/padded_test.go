package gitread

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// padTo writes content to path followed by pad bytes, size bytes in all.
func padTo(t *testing.T, path, content string, pad byte, size int) {
	t.Helper()
	require.Less(t, len(content), size)
	data := append([]byte(content), bytes.Repeat([]byte{pad}, size-len(content))...)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// HEAD, a loose ref, a .git file and a commondir that git reads whatever
// trails what it parses (whitespace, or after an object id anything) are
// read as git reads them, however much trails, up to git's own bound on a
// .git file (1 MiB, past which git refuses it too).
func TestPaddedGitFilesAsGitReadsThem(t *testing.T) {
	const big = 200 << 10
	setup := func(t *testing.T) (main, linked, rev string) {
		root := tempDir(t)
		main = filepath.Join(root, "main")
		rev = initRepo(t, main, map[string]string{"run_agent.py": "x\n"})
		linked = filepath.Join(root, "linked")
		gittest.Git(t, main, "worktree", "add", "-q", "-b", "wt", linked)
		return main, linked, rev
	}
	t.Run("HEAD naming a branch, then spaces", func(t *testing.T) {
		main, _, rev := setup(t)
		head, err := os.ReadFile(filepath.Join(main, ".git", "HEAD"))
		require.NoError(t, err)
		padTo(t, filepath.Join(main, ".git", "HEAD"), strings.TrimSpace(string(head)), ' ', big)
		assertAgreesWithGit(t, filepath.Join(main, "run_agent.py"), "padded HEAD")
		requireGitHead(t, main, rev, "git reads the padded HEAD")
	})
	t.Run("detached HEAD, then anything", func(t *testing.T) {
		main, _, rev := setup(t)
		padTo(t, filepath.Join(main, ".git", "HEAD"), rev+"\n", 'x', big)
		assertAgreesWithGit(t, filepath.Join(main, "run_agent.py"), "padded detached HEAD")
		requireGitHead(t, main, rev, "git reads the padded HEAD")
	})
	t.Run("a branch's loose ref, then anything", func(t *testing.T) {
		main, _, rev := setup(t)
		head := strings.TrimSpace(gittest.Git(t, main, "symbolic-ref", "HEAD"))
		padTo(t, filepath.Join(main, ".git", filepath.FromSlash(head)), rev+" ", 'x', big)
		assertAgreesWithGit(t, filepath.Join(main, "run_agent.py"), "padded loose ref")
		requireGitHead(t, main, rev, "git reads the padded ref")
	})
	t.Run("commondir, then line ends", func(t *testing.T) {
		main, linked, rev := setup(t)
		gitDir := strings.TrimSpace(gittest.Git(t, linked, "rev-parse", "--absolute-git-dir"))
		padTo(t, filepath.Join(gitDir, "commondir"), filepath.Join(main, ".git"), '\n', big)
		assertAgreesWithGit(t, filepath.Join(linked, "run_agent.py"), "padded commondir")
		requireGitHead(t, linked, rev, "git reads the padded commondir")
	})
	for name, size := range map[string]int{"a .git file of 1 MiB": 1 << 20, "a .git file over 1 MiB": 1<<20 + 1} {
		t.Run(name, func(t *testing.T) {
			_, linked, rev := setup(t)
			dotgit, err := os.ReadFile(filepath.Join(linked, ".git"))
			require.NoError(t, err)
			padTo(t, filepath.Join(linked, ".git"), strings.TrimSpace(string(dotgit)), '\n', size)
			assertAgreesWithGit(t, filepath.Join(linked, "run_agent.py"), "padded .git file")
			if size <= 1<<20 {
				requireGitHead(t, linked, rev, "git reads a .git file of 1 MiB")
			} else {
				_, ok := gitHead(t, linked)
				require.False(t, ok, "git refuses a .git file over 1 MiB")
			}
		})
	}
}

// requireGitHead checks that git rev-parse HEAD in dir gives rev.
func requireGitHead(t *testing.T, dir, rev, msg string) {
	t.Helper()
	got, ok := gitHead(t, dir)
	require.True(t, ok, "%s: git rev-parse HEAD fails", msg)
	require.Equal(t, rev, got, "%s", msg)
}

// FuzzHeadFileAgainstGit: whatever HEAD holds, followed by any number of
// one byte (up to 2 MiB), the reader gives HEAD's revision as git
// rev-parse HEAD does, and none where git gives none (a HEAD git does not
// read makes the directory no repository to git), except past the bound
// of 1 MiB it keeps, where it fails. The repository has a loose branch and a packed one,
// and the seeds name each, pad each, and detach HEAD at their commits.
func FuzzHeadFileAgainstGit(f *testing.F) {
	dir := tempDir(f)
	initRepo(f, dir, map[string]string{"run_agent.py": "x\n"})
	gittest.Git(f, dir, "branch", "packed")
	gittest.Git(f, dir, "pack-refs", "--all")
	gittest.Git(f, dir, "commit", "-q", "--allow-empty", "-m", "loose")
	module := filepath.Join(dir, "run_agent.py")
	head := filepath.Join(dir, ".git", "HEAD")
	f.Fuzz(func(t *testing.T, content []byte, pad byte, n uint32) {
		n %= 2 << 20
		data := append(append([]byte(nil), content...), bytes.Repeat([]byte{pad}, int(n))...)
		if err := os.WriteFile(head, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(data) > 1<<20 { // the bound docs/git.md gives
			// Past the bound the reader fails; git may read it.
			if _, err := readRevision(module); err == nil {
				t.Fatalf("a HEAD of %d bytes is read", len(data))
			}
			return
		}
		got, err := readRevision(module)
		want, gitOK := gitHeadWithin(t, dir)
		switch {
		case gitOK && (err != nil || got != want):
			t.Fatalf("HEAD %q: git reads %s, the reader %q (%v)", data, want, got, err)
		case !gitOK && got != "":
			t.Fatalf("HEAD %q: git fails, the reader says %s", data, got)
		}
	})
}
