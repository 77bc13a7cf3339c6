package gitread

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// needReftable skips the test, with the reason, where the git on PATH
// cannot make reftable repositories (before Git 2.45).
func needReftable(tb testing.TB) {
	tb.Helper()
	if !gittest.HasReftable() {
		tb.Skip("the git on PATH is older than 2.45 and makes no reftable repository; put a current one first (scripts/current-git.sh)")
	}
}

// reftableRepo makes a reftable repository in dir holding run_agent.py,
// with one commit, and returns the module's path.
func reftableRepo(t testing.TB, dir, objectFormat string) string {
	t.Helper()
	needReftable(t)
	initRepo(t, dir, map[string]string{"run_agent.py": "x = 1\n"}, "--ref-format=reftable", "--object-format="+objectFormat)
	return filepath.Join(dir, "run_agent.py")
}

// gitHead is git rev-parse HEAD in dir, or ok false where git fails.
func gitHead(t testing.TB, dir string) (rev string, ok bool) {
	t.Helper()
	out, err := gittest.Command(dir, "rev-parse", "--verify", "-q", "HEAD").Output()
	return strings.TrimSpace(string(out)), err == nil
}

// assertAgreesWithGit checks that the reader and git rev-parse HEAD, in
// the module's directory, agree: the same revision, or both failing. A
// revision the reader gives is never one git does not.
func assertAgreesWithGit(t *testing.T, module, when string) {
	t.Helper()
	want, gitOK := gitHead(t, filepath.Dir(module))
	got, err := readHead(t, module)
	if gitOK {
		require.NoError(t, err, "%s: git reads HEAD %s", when, want)
		assert.Equal(t, want, got, "%s", when)
	} else {
		assert.True(t, err != nil || got == "", "%s: the reader says %s where git fails", when, got)
	}
}

// manyRefs creates n branches with one update-ref transaction.
func manyRefs(t testing.TB, dir, prefix string, n int) {
	t.Helper()
	var stdin strings.Builder
	for i := range n {
		fmt.Fprintf(&stdin, "create refs/heads/%s/%05d HEAD\n", prefix, i)
	}
	cmd := gittest.Command(dir, "update-ref", "--stdin")
	cmd.Stdin = strings.NewReader(stdin.String())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "update-ref --stdin: %s", out)
}

// stackShape reports whether a stack's tables have an index, and a block
// with more than one restart point: what a lookup through them exercises.
func stackShape(t *testing.T, dir, objectFormat string) (indexed, restarts bool) {
	t.Helper()
	r := reader{fs: System}
	st, err := r.readStack(filepath.Join(dir, ".git", "reftable"), hashLenOf(objectFormat))
	require.NoError(t, err)
	for _, tb := range st.tables {
		indexed = indexed || tb.refIndex != 0
		for off := uint64(0); ; {
			b, ok, err := tb.initBlock(off, blockRef)
			require.NoError(t, err)
			if !ok {
				break
			}
			restarts = restarts || b.restarts > 1
			off += uint64(b.fullSize)
		}
	}
	return indexed, restarts
}

// A reftable repository, SHA-1 and SHA-256, main and linked worktrees:
// after each ref operation the reader reads the HEAD git reads in the
// module's directory.
func TestReftableReadsAsGit(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			dir := tempDir(t)
			module := reftableRepo(t, dir, format)
			first := git(t, dir, "rev-parse", "HEAD")
			assertAgreesWithGit(t, module, "init")
			steps := []struct {
				name string
				do   func()
			}{
				{"commit", func() { commit(t, dir, "run_agent.py", "x = 2\n") }},
				{"branch", func() { git(t, dir, "branch", "topic", first) }},
				{"checkout of another branch", func() { git(t, dir, "checkout", "-q", "topic") }},
				{"branch -m of HEAD's branch", func() { git(t, dir, "branch", "-m", "topic", "renamed") }},
				{"checkout back", func() { git(t, dir, "checkout", "-q", "main") }},
				{"branch -D", func() { git(t, dir, "branch", "-D", "renamed") }},
				{"symbolic-ref HEAD", func() {
					git(t, dir, "branch", "other", first)
					git(t, dir, "symbolic-ref", "HEAD", "refs/heads/other")
				}},
				{"HEAD on a deleted branch", func() {
					git(t, dir, "symbolic-ref", "HEAD", "refs/heads/main")
					git(t, dir, "update-ref", "-d", "refs/heads/other")
					git(t, dir, "symbolic-ref", "HEAD", "refs/heads/other")
				}},
				{"HEAD back", func() { git(t, dir, "symbolic-ref", "HEAD", "refs/heads/main") }},
				{"pack-refs", func() { git(t, dir, "pack-refs", "--all") }},
				{"gc", func() { git(t, dir, "gc", "-q", "--prune=now") }},
				{"thousands of refs", func() { manyRefs(t, dir, "many", 3000) }},
				{"commit among them", func() { commit(t, dir, "run_agent.py", "x = 3\n") }},
				{"pack-refs of them", func() { git(t, dir, "pack-refs", "--all") }},
				{"a branch sorted among them", func() {
					git(t, dir, "checkout", "-q", "-b", "many/01500x", first)
				}},
				{"detached HEAD", func() { git(t, dir, "checkout", "-q", "--detach", "main") }},
				{"checkout of main", func() { git(t, dir, "checkout", "-q", "main") }},
				{"a tag and a deletion over the packed table", func() {
					git(t, dir, "tag", "-a", "-m", "v1", "v1")
					git(t, dir, "update-ref", "-d", "refs/heads/many/00007")
				}},
			}
			for _, s := range steps {
				s.do()
				assertAgreesWithGit(t, module, s.name)
			}
			indexed, restarts := stackShape(t, dir, format)
			assert.True(t, indexed, "the packed table of thousands of refs has an index")
			assert.True(t, restarts, "its blocks have restart points")

			// A linked worktree: HEAD in its own stack, its branch in
			// the common one.
			wt := filepath.Join(dir, "wt")
			git(t, dir, "worktree", "add", "-q", "-b", "wtbranch", wt, first)
			wtModule := filepath.Join(wt, "run_agent.py")
			assertAgreesWithGit(t, wtModule, "worktree add")
			assertAgreesWithGit(t, module, "main worktree after worktree add")
			for _, s := range []struct {
				name string
				do   func()
			}{
				{"commit in the linked worktree", func() { commit(t, wt, "run_agent.py", "x = 4\n") }},
				{"its branch moved from the main worktree", func() { git(t, dir, "update-ref", "refs/heads/wtbranch", "main") }},
				{"checkout in the linked worktree", func() { git(t, wt, "checkout", "-q", "-f", "-b", "wt2", first) }},
				{"detached in the linked worktree", func() { git(t, wt, "checkout", "-q", "--detach", "main") }},
				{"a per-worktree ref", func() { git(t, wt, "update-ref", "refs/worktree/mark", first) }},
				{"pack-refs in the linked worktree", func() { git(t, wt, "pack-refs", "--all") }},
				{"back on a branch", func() { git(t, wt, "checkout", "-q", "wt2") }},
			} {
				s.do()
				assertAgreesWithGit(t, wtModule, s.name)
				assertAgreesWithGit(t, module, s.name+", the main worktree")
			}
		})
	}
}

// Symbolic refs as deep as git follows them, and one deeper: the reader
// follows exactly as many as git does.
func TestReftableSymrefDepth(t *testing.T) {
	dir := tempDir(t)
	module := reftableRepo(t, dir, "sha1")
	for n := 1; n <= 6; n++ {
		prev := "refs/heads/main"
		for i := 1; i <= n; i++ {
			name := fmt.Sprintf("refs/heads/l%d", i)
			git(t, dir, "symbolic-ref", name, prev)
			prev = name
		}
		git(t, dir, "symbolic-ref", "HEAD", prev)
		assertAgreesWithGit(t, module, fmt.Sprintf("HEAD through %d symbolic refs", n))
		_, gitOK := gitHead(t, dir)
		if n >= 4 {
			assert.False(t, gitOK, "git follows %d symbolic refs from HEAD: the test does not reach its limit", n+1)
		}
		git(t, dir, "symbolic-ref", "HEAD", "refs/heads/main")
	}
}

// A files repository migrated to reftable by git refs migrate reads as git
// reads it.
func TestReftableMigrated(t *testing.T) {
	needReftable(t)
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	git(t, dir, "branch", "topic")
	git(t, dir, "pack-refs", "--all")
	commit(t, dir, "run_agent.py", "x = 2\n")
	git(t, dir, "refs", "migrate", "--ref-format=reftable")
	require.Equal(t, "reftable", git(t, dir, "rev-parse", "--show-ref-format"))
	assertAgreesWithGit(t, module, "migrated")
	commit(t, dir, "run_agent.py", "x = 3\n")
	assertAgreesWithGit(t, module, "a commit after the migration")
}
