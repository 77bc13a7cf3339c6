package gitread

import (
	"bytes"
	"crypto/sha1"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// readHead reads the checkout of module as a guard binding to it does and
// returns the revision; it fails the test when the read depends on nothing.
func readHead(t *testing.T, module string) (string, error) {
	t.Helper()
	abs, err := Abs(module)
	require.NoError(t, err)
	c, deps, err := Read(System, abs, true)
	if err == nil && c.Revision != "" {
		require.NotEmpty(t, deps, "Read(%q) depends on no file", module)
		require.True(t, deps.Unchanged(System), "Read(%q): the stamps of an unchanged checkout differ", module)
	}
	return c.Revision, err
}

// assertReadsHead checks that Read of the module in dir, whether it must
// exist or not, agrees with git rev-parse HEAD there.
func assertReadsHead(t *testing.T, dir, module string) string {
	t.Helper()
	want := git(t, dir, "rev-parse", "HEAD")
	got, err := readRevision(module)
	require.NoError(t, err)
	assert.Equal(t, want, got, "Read(%q)", module)
	bound, err := readHead(t, module)
	require.NoError(t, err)
	assert.Equal(t, want, bound, "Read(%q)", module)
	return got
}

func TestRevisionLayouts(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		dir := tempDir(t)
		module, _ := agentRepo(t, dir)
		assertReadsHead(t, dir, module)
	})
	t.Run("module in a subdirectory", func(t *testing.T) {
		dir := tempDir(t)
		initRepo(t, dir, map[string]string{"pkg/deep/run_agent.py": "x = 1\n"})
		assertReadsHead(t, dir, filepath.Join(dir, "pkg", "deep", "run_agent.py"))
	})
	t.Run("packed refs", func(t *testing.T) {
		dir := tempDir(t)
		module, _ := agentRepo(t, dir)
		git(t, dir, "pack-refs", "--all")
		require.NoFileExists(t, filepath.Join(dir, ".git", "refs", "heads", "main"))
		assertReadsHead(t, dir, module)
	})
	t.Run("detached HEAD", func(t *testing.T) {
		dir := tempDir(t)
		module, first := agentRepo(t, dir)
		commit(t, dir, "run_agent.py", "x = 2\n")
		git(t, dir, "checkout", "-q", "--detach", first)
		assert.Equal(t, first, assertReadsHead(t, dir, module))
	})
	t.Run("linked worktree", func(t *testing.T) {
		tmp := tempDir(t)
		main := filepath.Join(tmp, "main")
		agentRepo(t, main)
		git(t, main, "branch", "feature")
		wt := filepath.Join(tmp, "wt")
		git(t, main, "worktree", "add", "-q", wt, "feature")
		commit(t, wt, "run_agent.py", "class AIAgent: feature = 1\n")
		got := assertReadsHead(t, wt, filepath.Join(wt, "run_agent.py"))
		assert.NotEqual(t, git(t, main, "rev-parse", "HEAD"), got, "read the main worktree's HEAD")
		c, err := Inspect(filepath.Join(wt, "run_agent.py"))
		require.NoError(t, err)
		assert.Equal(t, "refs/heads/feature", c.Head)
		assert.Equal(t, resolved(t, filepath.Join(main, ".git")), c.CommonDir)
	})
	t.Run("linked worktree, packed refs", func(t *testing.T) {
		tmp := tempDir(t)
		main := filepath.Join(tmp, "main")
		agentRepo(t, main)
		wt := filepath.Join(tmp, "wt")
		git(t, main, "worktree", "add", "-q", "-b", "feature", wt)
		git(t, main, "pack-refs", "--all")
		assertReadsHead(t, wt, filepath.Join(wt, "run_agent.py"))
	})
	t.Run("submodule", func(t *testing.T) {
		tmp := tempDir(t)
		sub := filepath.Join(tmp, "agent-src")
		agentRepo(t, sub)
		super := filepath.Join(tmp, "super")
		initRepo(t, super, map[string]string{"README": "super\n"})
		git(t, super, "submodule", "add", "-q", sub, "agent")
		git(t, super, "commit", "-q", "-m", "add agent")
		inside := filepath.Join(super, "agent")
		require.FileExists(t, filepath.Join(inside, ".git"))
		got := assertReadsHead(t, inside, filepath.Join(inside, "run_agent.py"))
		assert.NotEqual(t, git(t, super, "rev-parse", "HEAD"), got)
	})
	t.Run("separate git dir", func(t *testing.T) {
		tmp := tempDir(t)
		dir := filepath.Join(tmp, "work")
		initRepo(t, dir, map[string]string{"run_agent.py": "x\n"}, "--separate-git-dir", filepath.Join(tmp, "gitdir"))
		assertReadsHead(t, dir, filepath.Join(dir, "run_agent.py"))
	})
	t.Run("index version 4", func(t *testing.T) {
		dir := tempDir(t)
		initRepo(t, dir, map[string]string{"a/one.py": "1\n", "a/two.py": "2\n", "run_agent.py": "x\n", "z/deep/name.py": "z\n"})
		git(t, dir, "update-index", "--index-version", "4")
		for _, m := range []string{"a/two.py", "run_agent.py", "z/deep/name.py"} {
			assertReadsHead(t, dir, filepath.Join(dir, m))
		}
		rev, err := readRevision(filepath.Join(dir, "a", "three.py"))
		require.NoError(t, err)
		assert.Empty(t, rev)
	})
	t.Run("long path name", func(t *testing.T) {
		dir := tempDir(t)
		name := strings.Repeat("d", 200) + "/" + strings.Repeat("e", 200) + "/" + strings.Repeat("f", 200) + "/" + strings.Repeat("g", 200) + "/" + strings.Repeat("h", 200) + "/" + strings.Repeat("m", 100) + ".py"
		initRepo(t, dir, map[string]string{name: "x\n", "b.py": "y\n"})
		assertReadsHead(t, dir, filepath.Join(dir, filepath.FromSlash(name)))
	})
	t.Run("sparse checkout with worktreeConfig", func(t *testing.T) {
		dir := tempDir(t)
		initRepo(t, dir, map[string]string{"run_agent.py": "x\n", "docs/big.txt": "y\n"})
		git(t, dir, "sparse-checkout", "init", "--cone")
		assert.Equal(t, "true", git(t, dir, "config", "extensions.worktreeConfig"))
		assertReadsHead(t, dir, filepath.Join(dir, "run_agent.py"))
	})
	t.Run("sparse index", func(t *testing.T) {
		dir := tempDir(t)
		initRepo(t, dir, map[string]string{"run_agent.py": "x\n", "docs/big.txt": "y\n", "docs/more/deeper.txt": "z\n"})
		git(t, dir, "sparse-checkout", "set", "--cone", "--sparse-index", "src")
		module := filepath.Join(dir, "run_agent.py")
		assertReadsHead(t, dir, module)
		// Whether a path under a sparse directory entry is tracked is in
		// the entry's tree, which is not read: unsupported, not a guess.
		require.Contains(t, git(t, dir, "ls-files", "--sparse"), "docs/")
		index, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
		require.NoError(t, err)
		for _, path := range []string{"docs/more/deeper.txt", "docs/big.txt", "docs/not-in-the-tree.txt"} {
			_, err := indexHasPath(index, path, 40)
			assert.ErrorIs(t, err, errors.ErrUnsupported, "indexHasPath(%q) in a sparse index", path)
		}
		for _, path := range []string{"docsx/a", "doc", "run_agent.py"} {
			got, err := indexHasPath(index, path, 40)
			require.NoError(t, err)
			assert.Equal(t, path == "run_agent.py", got, "indexHasPath(%q) in a sparse index", path)
		}
	})
	t.Run("sha256", func(t *testing.T) {
		dir := tempDir(t)
		module := filepath.Join(dir, "run_agent.py")
		initRepo(t, dir, map[string]string{"run_agent.py": "x\n"}, "--object-format=sha256")
		got := assertReadsHead(t, dir, module)
		assert.Len(t, got, 64)
		git(t, dir, "pack-refs", "--all")
		packed, err := readHead(t, module)
		require.NoError(t, err)
		assert.Equal(t, got, packed, "sha256, packed")
		moved := commit(t, dir, "run_agent.py", "y\n")
		now, err := readHead(t, module)
		require.NoError(t, err)
		assert.Equal(t, moved, now)
	})
}

func TestRevisionEmptyCases(t *testing.T) {
	t.Run("unborn branch", func(t *testing.T) {
		dir := tempDir(t)
		git(t, dir, "init", "-q")
		module := filepath.Join(dir, "run_agent.py")
		writeFile(t, module, "x\n")
		git(t, dir, "add", "run_agent.py")
		c, err := Inspect(module)
		require.NoError(t, err)
		assert.True(t, c.Tracked)
		assert.Empty(t, c.Revision)
		assert.Contains(t, c.Reason, "unborn")
	})
	t.Run("untracked", func(t *testing.T) {
		dir := tempDir(t)
		agentRepo(t, dir)
		module := filepath.Join(dir, "other.py")
		writeFile(t, module, "x\n")
		c, err := Inspect(module)
		require.NoError(t, err)
		assert.False(t, c.Tracked)
		assert.Empty(t, c.Revision)
		assert.Contains(t, c.Reason, "not tracked")
	})
	t.Run("no worktree", func(t *testing.T) {
		dir := tempDir(t)
		module := filepath.Join(dir, "run_agent.py")
		writeFile(t, module, "x\n")
		c, err := Inspect(module)
		require.NoError(t, err)
		assert.Empty(t, c.TopLevel)
		assert.Empty(t, c.Revision)
	})
	t.Run("module inside the git dir", func(t *testing.T) {
		dir := tempDir(t)
		agentRepo(t, dir)
		module := filepath.Join(dir, ".git", "description")
		rev, err := readRevision(module)
		require.NoError(t, err)
		assert.Empty(t, rev)
	})
	t.Run("deleted module still tracked", func(t *testing.T) {
		dir := tempDir(t)
		module, rev := agentRepo(t, dir)
		require.NoError(t, os.Remove(module))
		got, err := readRevision(module)
		require.NoError(t, err)
		assert.Equal(t, rev, got)
	})
}

func TestRevisionUnsupportedFormats(t *testing.T) {
	t.Run("reftable declared, no stack", func(t *testing.T) {
		// The files backend's refs under a config that says reftable:
		// git finds no HEAD in the (missing) stack and fails.
		dir := tempDir(t)
		module, _ := agentRepo(t, dir)
		git(t, dir, "config", "core.repositoryformatversion", "1")
		git(t, dir, "config", "extensions.refStorage", "reftable")
		_, err := readRevision(module)
		assert.ErrorContains(t, err, "HEAD is not in the reftable stack")
		_, err = readHead(t, module)
		assert.Error(t, err, "reading an unreadable checkout is an error, not an inert guard")
	})
	t.Run("ref storage elsewhere", func(t *testing.T) {
		dir := tempDir(t)
		module, _ := agentRepo(t, dir)
		git(t, dir, "config", "core.repositoryformatversion", "1")
		git(t, dir, "config", "extensions.refStorage", "reftable://elsewhere")
		_, err := readRevision(module)
		assert.ErrorContains(t, err, `ref storage "reftable://elsewhere" is not supported`)
		assert.ErrorIs(t, err, errors.ErrUnsupported)
	})
	t.Run("split index", func(t *testing.T) {
		dir := tempDir(t)
		module, _ := agentRepo(t, dir)
		git(t, dir, "update-index", "--split-index")
		_, err := readRevision(module)
		assert.ErrorContains(t, err, "split index")
		assert.ErrorIs(t, err, errors.ErrUnsupported)
	})
	t.Run("unknown extension", func(t *testing.T) {
		dir := tempDir(t)
		module, _ := agentRepo(t, dir)
		git(t, dir, "config", "core.repositoryformatversion", "1")
		git(t, dir, "config", "extensions.someFutureThing", "true")
		_, err := readRevision(module)
		assert.ErrorContains(t, err, `extension "somefuturething" is not supported`, "named as git lists it")
		assert.ErrorIs(t, err, errors.ErrUnsupported)
	})
}

// A symbolic ref never leads outside the Git directory: a HEAD naming
// "refs/" and an invalid name is a read failure, and a HEAD naming anything
// else is no valid HEAD, so that .git is no repository, as for git.
func TestHostileSymbolicRefIsRefused(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	writeFile(t, filepath.Join(dir, "outside"), strings.Repeat("a", 40)+"\n")
	for _, target := range []string{"refs/../../../outside", "refs/heads/a b", "refs/heads/x.lock"} {
		writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: "+target+"\n")
		_, err := readRevision(module)
		assert.ErrorContains(t, err, "not a valid ref name", "HEAD -> %q", target)
	}
	for _, target := range []string{"../outside", "/etc/passwd"} {
		writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: "+target+"\n")
		rev, err := readRevision(module)
		assert.NoError(t, err, "HEAD -> %q", target)
		assert.Empty(t, rev, "HEAD -> %q", target)
		out, gitErr := gittest.Command(dir, "rev-parse", "HEAD").CombinedOutput()
		assert.Error(t, gitErr, "git rev-parse HEAD with HEAD -> %q: %s", target, out)
	}
}

// An index extension git does not know is skipped when its signature
// starts with a capital (optional) and refused otherwise: ls-files fails,
// and so does the read, with an error matching errors.ErrUnsupported.
func TestIndexExtensionsAsGitReadsThem(t *testing.T) {
	for _, tc := range []struct {
		sig         string
		unsupported bool
	}{{"ABCD", false}, {"Zzzz", false}, {"abcd", true}, {"1bcd", true}, {"sDIR", true}} {
		t.Run(tc.sig, func(t *testing.T) {
			dir := tempDir(t)
			module, rev := agentRepo(t, dir)
			path := filepath.Join(dir, ".git", "index")
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			body := append(bytes.Clone(data[:len(data)-20]), tc.sig...)
			body = append(body, 0, 0, 0, 4, 'd', 'a', 't', 'a')
			sum := sha1.Sum(body)
			require.NoError(t, os.WriteFile(path, append(body, sum[:]...), 0o644))

			gitErr := gittest.Command(dir, "ls-files", "--error-unmatch", "run_agent.py").Run()
			got, err := readRevision(module)
			if tc.unsupported {
				require.Error(t, gitErr, "git refuses the %s extension", tc.sig)
				assert.ErrorIs(t, err, errors.ErrUnsupported)
				assert.Empty(t, got)
			} else {
				require.NoError(t, gitErr, "git skips the %s extension", tc.sig)
				require.NoError(t, err)
				assert.Equal(t, rev, got)
			}
		})
	}
}

// An index whose trailing checksum does not match its content is read by
// git (only fsck verifies it), so it is read here too, and the module is
// tracked, or not, as git says.
func TestIndexChecksumAsGitReadsIt(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		for _, tc := range []struct {
			name   string
			damage func(trailer []byte)
		}{
			{"a checksum with one byte changed", func(tr []byte) { tr[len(tr)-1] ^= 0xff }},
			{"a checksum of another content", func(tr []byte) { copy(tr, bytes.Repeat([]byte{0x5a}, len(tr))) }},
			{"an all-zero checksum (index.skipHash)", func(tr []byte) { clear(tr) }},
		} {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				dir := tempDir(t)
				rev := initRepo(t, dir, map[string]string{"run_agent.py": "x\n"}, "--object-format="+format)
				path := filepath.Join(dir, ".git", "index")
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				size := 20
				if format == "sha256" {
					size = 32
				}
				tc.damage(data[len(data)-size:])
				require.NoError(t, os.WriteFile(path, data, 0o644))
				gitErr := gittest.Command(dir, "ls-files", "--error-unmatch", "run_agent.py").Run()
				require.NoError(t, gitErr, "%s reads the index", gittest.Describe())
				got, err := readRevision(filepath.Join(dir, "run_agent.py"))
				require.NoError(t, err)
				assert.Equal(t, rev, got)
			})
		}
	}
}

func TestIndexFixtures(t *testing.T) {
	for _, tc := range []struct {
		file    string
		hashLen int
		tracked []string
	}{
		{"index-v2", 40, []string{"run_agent.py", "sub/deep/x.py", "sub/y.py"}},
		{"index-v3", 40, []string{"run_agent.py", "sub/deep/x.py", "sub/y.py", "later.py"}},
		{"index-v4", 40, []string{"run_agent.py", "sub/deep/x.py", "sub/y.py"}},
		{"index-sha256", 64, []string{"run_agent.py"}},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", tc.file))
		require.NoError(t, err)
		for _, p := range tc.tracked {
			got, err := indexHasPath(data, p, tc.hashLen)
			require.NoError(t, err, tc.file)
			assert.True(t, got, "indexHasPath(%s, %q)", tc.file, p)
		}
		for _, p := range []string{"sub", "sub/", "RUN_AGENT.py", "run_agent.p", "run_agent.pyc", "", "sub/deep"} {
			got, err := indexHasPath(data, p, tc.hashLen)
			require.NoError(t, err)
			assert.False(t, got, "indexHasPath(%s, %q)", tc.file, p)
		}
		// Git reads entries up to the file's end, the checksum's bytes
		// too: an index cut short reads where every entry it holds
		// still fits, and the module is in it.
		var lastFixed int
		if tc.hashLen == 40 {
			flags := indexEntryFlags(t, data)
			lastFixed = flags[len(flags)-1] + 2
		}
		for n := 0; n < len(data); n += 7 {
			got, err := indexHasPath(data[:n], "run_agent.py", tc.hashLen)
			if n < lastFixed || n < indexHeaderBytes+tc.hashLen/2 {
				assert.Error(t, err, "%s truncated to %d bytes", tc.file, n)
			} else if err == nil {
				assert.True(t, got, "%s truncated to %d bytes", tc.file, n)
			}
		}
	}
}

// core.worktree moves the worktree away from the directory holding .git;
// core.bare takes the worktree away, though git still reads HEAD and the
// index. Either way the module is tracked, or not, as git says in the
// module's directory.
func TestCoreWorktreeAndBare(t *testing.T) {
	t.Run("core.worktree a subdirectory", func(t *testing.T) {
		dir := tempDir(t)
		git(t, dir, "init", "-q")
		src := filepath.Join(dir, "src")
		git(t, dir, "config", "core.worktree", src)
		writeFile(t, filepath.Join(src, "run_agent.py"), "x\n")
		git(t, src, "add", "run_agent.py")
		git(t, src, "commit", "-q", "-m", "in the configured worktree")
		module := filepath.Join(src, "run_agent.py")
		git(t, src, "ls-files", "--error-unmatch", "run_agent.py")
		rev, err := readRevision(module)
		require.NoError(t, err)
		assert.Equal(t, git(t, src, "rev-parse", "HEAD"), rev)
		c, err := Inspect(module)
		require.NoError(t, err)
		assert.Equal(t, resolved(t, src), c.TopLevel)
	})
	t.Run("core.bare", func(t *testing.T) {
		dir := tempDir(t)
		rev := gittest.Init(t, dir, map[string]string{"run_agent.py": "x\n", "pkg/run_agent.py": "y\n", "pkg/lib.py": "z\n"})
		pkg := filepath.Join(dir, "pkg")
		for _, value := range []string{"true", "yes", "1"} {
			git(t, dir, "config", "core.bare", value)
			// git has no worktree: it matches the module's name from the
			// top level, whatever the directory it runs in.
			for _, module := range []string{filepath.Join(dir, "run_agent.py"), filepath.Join(pkg, "run_agent.py")} {
				git(t, filepath.Dir(module), "ls-files", "--error-unmatch", "run_agent.py")
				got, err := readRevision(module)
				require.NoError(t, err)
				assert.Equal(t, rev, got, "core.bare = %s, %s: git matches the top level's run_agent.py", value, module)
			}
			assert.Error(t, gittest.Command(pkg, "ls-files", "--error-unmatch", "lib.py").Run())
			got, err := readRevision(filepath.Join(pkg, "lib.py"))
			require.NoError(t, err)
			assert.Empty(t, got, "core.bare = %s, pkg/lib.py: no lib.py at the top level", value)
		}
		git(t, dir, "config", "core.bare", "false")
		got, err := readRevision(filepath.Join(pkg, "lib.py"))
		require.NoError(t, err)
		assert.Equal(t, rev, got)
	})
}

// A core.worktree with a tab inside names one directory to git 2.45 and
// later and another to earlier versions (a blank in place of the tab):
// the read fails, whichever git is installed, rather than take one side.
func TestCoreWorktreeGitsReadDifferently(t *testing.T) {
	dir := tempDir(t)
	git(t, dir, "init", "-q")
	for _, name := range []string{"a\tb", "a b"} {
		src := filepath.Join(dir, name)
		writeFile(t, filepath.Join(src, "run_agent.py"), "x\n")
	}
	config := filepath.Join(dir, ".git", "config")
	data, err := os.ReadFile(config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(config, append(data, "\tworktree = ../a\tb\n"...), 0o644))
	top := git(t, dir, "rev-parse", "--show-toplevel")
	want := "a b"
	if gittest.AtLeast(t, 2, 45) {
		want = "a\tb"
	}
	require.Equal(t, want, filepath.Base(top), "the worktree %s names", gittest.Describe())
	for _, name := range []string{"a\tb", "a b"} {
		src := filepath.Join(dir, name)
		_, err := readRevision(filepath.Join(src, "run_agent.py"))
		require.ErrorIs(t, err, ErrGitsDisagree, "module in %q", name)
	}
	// Both gits agree on the folded spelling: read as any other.
	require.NoError(t, os.WriteFile(config, append(data, "\tworktree = ../a  b\n"...), 0o644))
	src := filepath.Join(dir, "a  b")
	writeFile(t, filepath.Join(src, "run_agent.py"), "x\n")
	git(t, src, "add", "run_agent.py")
	git(t, src, "commit", "-q", "-m", "in a  b")
	rev, err := readRevision(filepath.Join(src, "run_agent.py"))
	require.NoError(t, err)
	assert.Equal(t, git(t, src, "rev-parse", "HEAD"), rev)
}

// Under extensions.worktreeConfig git takes core.bare and core.worktree
// from the Git directory's config.worktree, and honours them, and the
// repository config's, in a linked worktree too.
func TestWorktreeConfig(t *testing.T) {
	dir := tempDir(t)
	rev := gittest.Init(t, filepath.Join(dir, "main"), map[string]string{"pkg/run_agent.py": "x\n"})
	linked := filepath.Join(dir, "linked")
	git(t, filepath.Join(dir, "main"), "worktree", "add", "-q", "--detach", linked)
	module := filepath.Join(linked, "pkg", "run_agent.py")
	gitDir := git(t, linked, "rev-parse", "--absolute-git-dir")
	agree := func(what string) {
		t.Helper()
		_, gitErr := gittest.Command(filepath.Dir(module), "ls-files", "--error-unmatch", "run_agent.py").Output()
		got, err := readRevision(module)
		require.NoError(t, err, what)
		if gitErr == nil {
			assert.Equal(t, rev, got, "%s: git tracks the module", what)
		} else {
			assert.Empty(t, got, "%s: git does not track the module", what)
		}
	}
	agree("a linked worktree")
	git(t, linked, "config", "core.bare", "true")
	agree("core.bare in the common config, ignored in a linked worktree")
	git(t, linked, "config", "extensions.worktreeConfig", "true")
	agree("core.bare in the common config, honoured under worktreeConfig")
	git(t, linked, "config", "--unset", "core.bare")
	agree("worktreeConfig, no core.bare")
	writeFile(t, filepath.Join(gitDir, "config.worktree"), "[core]\n\tbare = true\n")
	agree("core.bare in the linked worktree's config.worktree")
	writeFile(t, filepath.Join(gitDir, "config.worktree"), "[core]\n\tworktree = "+filepath.Join(linked, "pkg")+"\n")
	agree("core.worktree in the linked worktree's config.worktree")
	writeFile(t, filepath.Join(gitDir, "config.worktree"), "[core]\n\tbare = false\n")
	agree("core.bare false in config.worktree")
}

// A commondir that is there must be readable, as git reads it or dies: a
// directory or an empty file fails git, and the read; a lone newline is a
// commondir of nothing to both.
func TestCommondirGitCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(path string) error
		fail bool
	}{
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o644) }, true},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o755) }, true},
		{"a newline", func(p string) error { return os.WriteFile(p, []byte("\n"), 0o644) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempDir(t)
			module, rev := agentRepo(t, dir)
			require.NoError(t, tc.make(filepath.Join(dir, ".git", "commondir")))
			_, gitErr := gittest.Command(dir, "rev-parse", "HEAD").Output()
			got, err := readRevision(module)
			if tc.fail {
				require.Error(t, gitErr)
				assert.Error(t, err)
				assert.Empty(t, got)
			} else {
				require.NoError(t, gitErr)
				require.NoError(t, err)
				assert.Equal(t, rev, got)
			}
		})
	}
}

// Bytes git reads its own way: a CR before an LF in packed-refs is part of
// the ref's name, and a NUL ends what git reads of HEAD, a loose ref and a
// .git file. Read agrees with git rev-parse HEAD in each case.
func TestReadsBytesAsGitDoes(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir, rev string)
	}{
		{"packed-refs with CRLF", func(t *testing.T, dir, rev string) {
			git(t, dir, "pack-refs", "--all")
			p := filepath.Join(dir, ".git", "packed-refs")
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			writeFile(t, p, strings.ReplaceAll(string(data), "\n", "\r\n"))
		}},
		{"HEAD with a NUL", func(t *testing.T, dir, rev string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/main\x00junk\n")
		}},
		{"a loose ref with a NUL", func(t *testing.T, dir, rev string) {
			writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "main"), rev+"\x00junk\n")
		}},
		// Git's isspace is " \t\n\r": a \v or \f is no white space.
		{"a loose ref ending in a vertical tab", func(t *testing.T, dir, rev string) {
			writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "main"), rev+"\v")
		}},
		{"a loose ref ending in a form feed", func(t *testing.T, dir, rev string) {
			writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "main"), rev+"\f\n")
		}},
		{"a loose ref ending in a tab and CRLF", func(t *testing.T, dir, rev string) {
			writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "main"), rev+"\t\r\n")
		}},
		{"HEAD ending in a vertical tab", func(t *testing.T, dir, rev string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/main\v\n")
		}},
		{"HEAD an object id and a vertical tab", func(t *testing.T, dir, rev string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), rev+"\v\n")
		}},
		{"HEAD with a vertical tab after ref:", func(t *testing.T, dir, rev string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref:\vrefs/heads/main\n")
		}},
		{"HEAD with a tab after ref:", func(t *testing.T, dir, rev string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref:\trefs/heads/main\n")
		}},
		{"a config that is a directory", func(t *testing.T, dir, rev string) {
			config := filepath.Join(dir, ".git", "config")
			require.NoError(t, os.Remove(config))
			require.NoError(t, os.Mkdir(config, 0o755))
		}},
		{"a .git file with a NUL", func(t *testing.T, dir, rev string) {
			require.NoError(t, os.Rename(filepath.Join(dir, ".git"), filepath.Join(dir, "..", "sep.git")))
			writeFile(t, filepath.Join(dir, ".git"), "gitdir: ../sep.git\x00junk\n")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(tempDir(t), "agent")
			module, rev := agentRepo(t, dir)
			tc.setup(t, dir, rev)
			out, gitErr := gittest.Command(dir, "rev-parse", "--verify", "-q", "HEAD").Output()
			got, err := readHead(t, module)
			if gitErr != nil {
				assert.True(t, err != nil || got == "", "Read gives %q where git rev-parse fails", got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, strings.TrimSpace(string(out)), got)
		})
	}
}
