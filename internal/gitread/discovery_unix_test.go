//go:build unix

package gitread

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// entry is one thing that can be at a name in a directory on the way to
// the module.
type entry struct {
	name string
	make func(t *testing.T, path, rev string)
}

func fileEntry(name, content string, perm os.FileMode) entry {
	return entry{name, func(t *testing.T, path, rev string) {
		require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(content, "REV", rev)), perm))
	}}
}

func linkEntry(name, target string) entry {
	return entry{name, func(t *testing.T, path, _ string) { require.NoError(t, os.Symlink(target, path)) }}
}

var (
	absent   = entry{"absent", func(*testing.T, string, string) {}}
	dirEntry = entry{"dir", func(t *testing.T, path, _ string) { require.NoError(t, os.Mkdir(path, 0o755)) }}
)

// Every combination of what makes a directory a Git directory to git (a
// HEAD, objects, refs) and of a .git beside them, in the module's own
// directory of a checkout: the reader agrees with git on whether the
// module is current (HEAD at the bound revision, tracked in the worktree
// git finds), or git gives no answer and neither does the reader.
//
// Each HEAD is a subtest of its own, on a repository of its own, run in
// parallel with the others: git is the oracle of each layout, and each
// layout is made and removed in turn in its repository.
func TestDiscoveryAgreesWithGit(t *testing.T) {
	// Names never listed in pkg by the commit: the index of the top
	// worktree tracks pkg/mod.py only.
	heads := []entry{
		absent, dirEntry,
		fileEntry("ref", "ref: refs/heads/main\n", 0o644),
		fileEntry("ref without space", "ref:refs/heads/main\n", 0o644),
		fileEntry("object id", "REV\n", 0o644),
		fileEntry("garbage", "not a ref\n", 0o644),
		fileEntry("ref outside refs/", "ref: heads/main\n", 0o644),
		linkEntry("link to a ref", "refs/heads/main"),
		linkEntry("link elsewhere", "../mod.py"),
	}
	subs := []entry{
		absent, dirEntry,
		fileEntry("executable file", "", 0o755),
		fileEntry("plain file", "", 0o644),
		linkEntry("link to a directory", "."),
		linkEntry("dangling link", "nowhere"),
	}
	dotgits := []entry{
		absent,
		dirEntry, // not a Git directory: passed over
		fileEntry("gitfile to nowhere", "gitdir: nowhere\n", 0o644),
		fileEntry("gitfile to the top", "gitdir: ../.git\n", 0o644),
	}
	names := []string{"HEAD", "objects", "refs", ".git"}
	var n atomic.Int64
	t.Cleanup(func() { t.Logf("%d layouts compared with %s", n.Load(), gittest.Describe()) })
	for hi, head := range heads {
		t.Run(head.name, func(t *testing.T) {
			t.Parallel()
			discoveryAgreesWithGit(t, hi, head, subs, dotgits, names, &n)
		})
	}
}

// discoveryAgreesWithGit compares the layouts with HEAD head, the hi-th,
// in a repository of its own, and counts them in n.
func discoveryAgreesWithGit(t *testing.T, hi int, head entry, subs, dotgits []entry, names []string, n *atomic.Int64) {
	root := gittest.TempDir(t)
	repo := filepath.Join(root, "repo")
	rev := gittest.Init(t, repo, map[string]string{"pkg/mod.py": "x = 1\n"})
	pkg := filepath.Join(repo, "pkg")
	module := filepath.Join(pkg, "mod.py")
	ask := func(args ...string) (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = pkg, gittest.Env
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	// Without RUNTIMEGUARD_LONG (which CI sets), a third of the layouts of
	// each HEAD, another third for the next: every layout of objects,
	// refs and .git is still compared, with three of the nine HEADs.
	long := os.Getenv("RUNTIMEGUARD_LONG") != ""
	k := 0
	for _, objects := range subs {
		for _, refs := range subs {
			for _, dotgit := range dotgits {
				k++
				if !long && (k+hi)%3 != 0 {
					continue
				}
				for i, e := range []entry{head, objects, refs, dotgit} {
					e.make(t, filepath.Join(pkg, names[i]), rev)
				}
				grev, ok := ask("rev-parse", "--verify", "-q", "HEAD")
				tracked := false
				if ok && grev == rev {
					_, tracked = ask("ls-files", "--error-unmatch", "--", "mod.py")
				}
				gitCurrent := ok && grev == rev && tracked

				abs, err := Abs(module)
				require.NoError(t, err)
				c, _, err := Read(System, abs, true)
				current := err == nil && c.Revision == rev && c.Tracked
				if current != gitCurrent {
					t.Errorf("HEAD %s, objects %s, refs %s, .git %s: the reader says current %v (%q, tracked %v, %v: %s), git says %v (HEAD %q, ok %v, tracked %v)",
						head.name, objects.name, refs.name, dotgit.name,
						current, c.Revision, c.Tracked, err, c.Reason, gitCurrent, grev, ok, tracked)
				}
				for _, name := range names {
					require.NoError(t, os.RemoveAll(filepath.Join(pkg, name)))
				}
				n.Add(1)
			}
		}
	}
}
