package gitread

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// needReftable skips the test, with the reason, where the git on PATH
// cannot make reftable repositories (before Git 2.45).
func needReftable(tb testing.TB) {
	tb.Helper()
	if !gittest.HasReftable() {
		tb.Skip("the git on PATH is older than 2.45 and makes no reftable repository; put a current one first (.ci/current-git.sh)")
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
				{"HEAD on a per-worktree ref", func() {
					git(t, wt, "update-ref", "refs/worktree/head", first)
					git(t, wt, "symbolic-ref", "HEAD", "refs/worktree/head")
				}},
				{"the per-worktree ref moved", func() { git(t, wt, "update-ref", "refs/worktree/head", "main") }},
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

// tablePaths returns the tables a stack lists, oldest first.
func tablePaths(t testing.TB, reftableDir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(reftableDir, "tables.list"))
	require.NoError(t, err)
	var paths []string
	for _, name := range strings.Fields(string(data)) {
		paths = append(paths, filepath.Join(reftableDir, name))
	}
	return paths
}

// rewriteTable replaces a table's bytes in place, keeping its mode.
func rewriteTable(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(path, 0o644))
	require.NoError(t, os.WriteFile(path, edit(data), 0o644))
}

// A stack or table that git refuses is a read failure, never a guess and
// never a guard that guards nothing; a special file is refused at once.
func TestReftableDamaged(t *testing.T) {
	sha1Dir := tempDir(t)
	reftableRepo(t, sha1Dir, "sha1")
	sha1Table := tablePaths(t, filepath.Join(sha1Dir, ".git", "reftable"))[0]
	flip := func(off func(n int) int) func([]byte) []byte {
		return func(b []byte) []byte { b[off(len(b))] ^= 0x40; return b }
	}
	cases := []damageCase{
		{"the footer's CRC", "sha1", func(t *testing.T, rt string) {
			rewriteTable(t, tablePaths(t, rt)[0], flip(func(n int) int { return n - 1 }))
		}, false},
		{"the header's block size", "sha1", func(t *testing.T, rt string) {
			rewriteTable(t, tablePaths(t, rt)[0], flip(func(int) int { return 6 }))
		}, false},
		{"the version", "sha256", func(t *testing.T, rt string) {
			rewriteTable(t, tablePaths(t, rt)[0], func(b []byte) []byte { b[4] = 3; return b })
		}, false},
		{"the magic", "sha1", func(t *testing.T, rt string) {
			rewriteTable(t, tablePaths(t, rt)[0], flip(func(int) int { return 0 }))
		}, false},
		{"truncated", "sha256", func(t *testing.T, rt string) {
			rewriteTable(t, tablePaths(t, rt)[0], func(b []byte) []byte { return b[:len(b)-10] })
		}, false},
		{"extended", "sha1", func(t *testing.T, rt string) {
			rewriteTable(t, tablePaths(t, rt)[0], func(b []byte) []byte { return append(b, 0, 0, 0, 0) })
		}, false},
		{"empty", "sha1", func(t *testing.T, rt string) {
			rewriteTable(t, tablePaths(t, rt)[0], func([]byte) []byte { return nil })
		}, false},
		{"a listed table missing", "sha1", func(t *testing.T, rt string) {
			require.NoError(t, os.Remove(tablePaths(t, rt)[0]))
		}, false},
		{"tables.list without its final newline", "sha1", func(t *testing.T, rt string) {
			list := filepath.Join(rt, "tables.list")
			data, err := os.ReadFile(list)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(list, []byte(strings.TrimSuffix(string(data), "\n")), 0o644))
		}, false},
		{"a SHA-1 table in a SHA-256 repository", "sha256", func(t *testing.T, rt string) {
			data, err := os.ReadFile(sha1Table)
			require.NoError(t, err)
			p := tablePaths(t, rt)[0]
			require.NoError(t, os.Chmod(p, 0o644))
			require.NoError(t, os.WriteFile(p, data, 0o644))
		}, false},
		{"a table that is a directory", "sha1", func(t *testing.T, rt string) {
			p := tablePaths(t, rt)[0]
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o755))
		}, false},
	}
	runDamageCases(t, cases)
}

// damageCase is a stack damaged as git would not have left it.
type damageCase struct {
	name   string
	format string
	damage func(t *testing.T, reftable string)
	noGit  bool // git would hang on it
}

func runDamageCases(t *testing.T, cases []damageCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempDir(t)
			module := reftableRepo(t, dir, tc.format)
			commit(t, dir, "run_agent.py", "x = 2\n")
			tc.damage(t, filepath.Join(dir, ".git", "reftable"))
			if !tc.noGit {
				_, gitOK := gitHead(t, dir)
				require.False(t, gitOK, "git reads the damaged stack: the case damages nothing that matters")
			}
			rev, err := readHead(t, module)
			assert.Error(t, err, "the reader gives %q", rev)
			assert.Empty(t, rev)
		})
	}
}

// A stack compacted while it is read (tables.list rewritten, the tables it
// named removed) is read again, as git reloads it: the answer is the
// compacted stack's, and it depends on the new tables.list.
func TestReftableCompactedWhileRead(t *testing.T) {
	dir := tempDir(t)
	module := reftableRepo(t, dir, "sha1")
	rt := filepath.Join(dir, ".git", "reftable")
	// A large table under small ones: geometric auto-compaction keeps
	// them apart.
	manyRefs(t, dir, "base", 500)
	commit(t, dir, "run_agent.py", "x = 2\n")
	require.Greater(t, len(tablePaths(t, rt)), 1, "the stack has tables to compact")
	compacted := 0
	fsys := *System
	fsys.ReadFile = func(path string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		if strings.HasSuffix(path, ".ref") && compacted == 0 {
			compacted++
			git(t, dir, "pack-refs", "--all")
			_, err := os.Stat(path)
			require.ErrorIs(t, err, os.ErrNotExist, "compaction removed the table being read")
		}
		return System.ReadFile(path, limit, nofollow)
	}
	abs, err := Abs(module)
	require.NoError(t, err)
	c, deps, err := Read(&fsys, abs, true)
	require.NoError(t, err)
	require.Equal(t, 1, compacted)
	assert.Equal(t, git(t, dir, "rev-parse", "HEAD"), c.Revision)
	assert.Len(t, tablePaths(t, rt), 1, "pack-refs compacted the stack")
	assert.True(t, deps.Unchanged(System), "the dependencies are the compacted stack's")
	for _, d := range deps {
		if filepath.Dir(d.Path) == rt && d.Path != filepath.Join(rt, "tables.list") {
			assert.Equal(t, tablePaths(t, rt)[0], d.Path, "a dependency on a table the compaction removed")
		}
	}
}

// What git's discovery asks of a reftable repository's Git directory is
// what it asks of any: a valid HEAD (the stub), objects and refs. The
// stub's text is not where HEAD is read from.
func TestReftableDiscovery(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, gitDir string)
		inert  bool // git finds no repository: neither does the reader
	}{
		{"the HEAD stub names another branch", func(t *testing.T, gitDir string) {
			writeFile(t, filepath.Join(gitDir, "HEAD"), "ref: refs/heads/elsewhere\n")
		}, false},
		{"the HEAD stub holds an object id", func(t *testing.T, gitDir string) {
			writeFile(t, filepath.Join(gitDir, "HEAD"), strings.Repeat("0", 40)+"\n")
		}, false},
		{"the HEAD stub not valid", func(t *testing.T, gitDir string) {
			writeFile(t, filepath.Join(gitDir, "HEAD"), "garbage\n")
		}, true},
		{"the HEAD stub removed", func(t *testing.T, gitDir string) {
			require.NoError(t, os.Remove(filepath.Join(gitDir, "HEAD")))
		}, true},
		{"refs removed", func(t *testing.T, gitDir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(gitDir, "refs")))
		}, true},
		{"refs/heads removed", func(t *testing.T, gitDir string) {
			require.NoError(t, os.Remove(filepath.Join(gitDir, "refs", "heads")))
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempDir(t)
			module := reftableRepo(t, dir, "sha1")
			tc.change(t, filepath.Join(dir, ".git"))
			assertAgreesWithGit(t, module, tc.name)
			_, gitOK := gitHead(t, dir)
			assert.Equal(t, !tc.inert, gitOK, "git rev-parse HEAD")
			rev, err := readHead(t, module)
			require.NoError(t, err)
			assert.Equal(t, tc.inert, rev == "", "the reader finds no revision")
		})
	}
}

// A deletion record in a newer table hides the ref an older table still
// holds: the ref does not exist, as for git.
func TestReftableDeletionShadowsOlderTable(t *testing.T) {
	dir := tempDir(t)
	module := reftableRepo(t, dir, "sha1")
	first := git(t, dir, "rev-parse", "HEAD")
	// A large table holding the branch, under small ones that geometric
	// auto-compaction keeps apart from it.
	var stdin strings.Builder
	for i := range 500 {
		fmt.Fprintf(&stdin, "create refs/heads/many/%05d HEAD\n", i)
	}
	stdin.WriteString("create refs/heads/other HEAD\n")
	cmd := gittest.Command(dir, "update-ref", "--stdin")
	cmd.Stdin = strings.NewReader(stdin.String())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	commit(t, dir, "run_agent.py", "x = 2\n")
	git(t, dir, "update-ref", "-d", "refs/heads/other")
	git(t, dir, "symbolic-ref", "HEAD", "refs/heads/other")

	r := reader{fs: System}
	st, err := r.readStack(filepath.Join(dir, ".git", "reftable"), 40)
	require.NoError(t, err)
	require.Greater(t, len(st.tables), 1)
	older := &rtStack{tables: st.tables[:1]}
	_, oid, found, err := older.lookup("refs/heads/other")
	require.NoError(t, err)
	require.True(t, found, "the oldest table still holds the branch")
	require.Equal(t, first, oid)

	_, gitOK := gitHead(t, dir)
	require.False(t, gitOK, "git finds the deleted branch")
	abs, err := Abs(module)
	require.NoError(t, err)
	c, _, err := Read(System, abs, true)
	require.NoError(t, err)
	assert.Empty(t, c.Revision, "the deleted branch is read from the older table")
	assert.True(t, c.Transient, "HEAD on a missing branch among other refs is transient")
}

// indexLevels is the depth of the ref index of a stack's tables: 0 where
// none has one, 2 for an index of index blocks.
func indexLevels(t *testing.T, dir string) int {
	t.Helper()
	r := reader{fs: System}
	st, err := r.readStack(filepath.Join(dir, ".git", "reftable"), 40)
	require.NoError(t, err)
	levels := 0
	for _, tb := range st.tables {
		for off, n := tb.refIndex, 0; off != 0; {
			b, ok, err := tb.initBlock(off, blockAny)
			require.NoError(t, err)
			require.True(t, ok)
			if b.typ != blockIndex {
				break
			}
			n++
			levels = max(levels, n)
			it := &rtIter{t: tb}
			it.init(b, off)
			rec, ok, err := it.nextInBlock()
			require.NoError(t, err)
			require.True(t, ok)
			off = rec.offset
		}
	}
	return levels
}

// Tables written with small blocks (an index of index blocks, padded
// blocks) and restart points at every record or at few: every ref, the
// first, the last and one in the middle, and names between them, read as
// git reads them.
func TestReftableSmallBlocks(t *testing.T) {
	for _, restarts := range []string{"1", "16", "1000"} {
		t.Run("restart interval "+restarts, func(t *testing.T) {
			dir := tempDir(t)
			module := reftableRepo(t, dir, "sha1")
			git(t, dir, "config", "reftable.blockSize", "300")
			git(t, dir, "config", "reftable.restartInterval", restarts)
			manyRefs(t, dir, "many", 3000)
			commit(t, dir, "run_agent.py", "x = 2\n")
			git(t, dir, "pack-refs", "--all")
			assert.GreaterOrEqual(t, indexLevels(t, dir), 2, "the table has an index of index blocks")
			for _, target := range []string{"many/00000", "many/01500", "many/02999", "many/015", "many/0", "main", "zzz", "a"} {
				git(t, dir, "symbolic-ref", "HEAD", "refs/heads/"+target)
				assertAgreesWithGit(t, module, "HEAD on "+target)
			}
		})
	}
}
