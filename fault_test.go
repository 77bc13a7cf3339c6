package runtimeguard

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// checkWithin runs a check in a goroutine and fails the test if it panics
// or does not return.
func checkWithin(t *testing.T, g *Guard) error {
	t.Helper()
	type result struct {
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{panic: p}
			}
		}()
		done <- result{err: g.EnsureCurrent()}
	}()
	select {
	case r := <-done:
		require.Nil(t, r.panic, "EnsureCurrent panicked")
		return r.err
	case <-time.After(60 * time.Second):
		t.Fatal("EnsureCurrent did not return")
		return nil
	}
}

// Each fault, after binding, either stays current when HEAD truly did not
// move or fails closed with the update state, and never panics or hangs.
func TestFaultMatrix(t *testing.T) {
	cases := []struct {
		name  string
		fault func(t *testing.T, dir string)
		stale bool
	}{
		{".git removed", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, ".git")))
		}, true},
		{"HEAD emptied", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "")
		}, true},
		{"HEAD garbage", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "\x00\xff garbage that is no ref\n")
		}, true},
		{"HEAD a short id", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "abc123\n")
		}, true},
		{"HEAD at a missing ref", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/nowhere\n")
		}, true},
		{"HEAD a symref loop", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/loop\n")
			writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "loop"), "ref: refs/heads/loop\n")
		}, true},
		{"HEAD a directory", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, ".git", "HEAD")))
			require.NoError(t, os.Mkdir(filepath.Join(dir, ".git", "HEAD"), 0o755))
		}, true},
		{"branch ref garbage", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "main"), "not an object id\n")
		}, true},
		{".git a file pointing nowhere", func(t *testing.T, dir string) {
			require.NoError(t, os.Rename(filepath.Join(dir, ".git"), filepath.Join(dir, "..", "elsewhere")))
			writeFile(t, filepath.Join(dir, ".git"), "gitdir: /nonexistent/runtimeguard/gitdir\n")
		}, true},
		{".git a file of garbage", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, ".git")))
			writeFile(t, filepath.Join(dir, ".git"), "\xff\xfe\x00")
		}, true},
		{"index truncated", func(t *testing.T, dir string) {
			index := filepath.Join(dir, ".git", "index")
			data, err := os.ReadFile(index)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(index, data[:len(data)/2], 0o644))
		}, true},
		{"index signature corrupted", func(t *testing.T, dir string) {
			// Not a byte of an entry's stat data, which git reads as
			// any other value (the checksum is verified only by fsck).
			index := filepath.Join(dir, ".git", "index")
			data, err := os.ReadFile(index)
			require.NoError(t, err)
			data[0] ^= 0xff
			require.NoError(t, os.WriteFile(index, data, 0o644))
			require.Error(t, gittest.Command(dir, "ls-files").Run(), "git refuses the index")
		}, true},
		{"index removed", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, ".git", "index")))
		}, true},
		{"config garbage", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "config"), "[core\n\x00")
		}, true},
		{"packed-refs garbage while the branch is packed", func(t *testing.T, dir string) {
			git(t, dir, "pack-refs", "--all")
			writeFile(t, filepath.Join(dir, ".git", "packed-refs"), "\xff\x00 refs/heads/main\n")
		}, true},
		{"replaced by another repository", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(dir))
			agentRepo(t, dir)
			commit(t, dir, "run_agent.py", "another history\n")
		}, true},
		{"replaced by a clone at the same commit", func(t *testing.T, dir string) {
			clone := dir + "-clone"
			git(t, filepath.Dir(dir), "clone", "-q", dir, clone)
			require.NoError(t, os.RemoveAll(dir))
			require.NoError(t, os.Rename(clone, dir))
		}, false},
		{"module file deleted", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "run_agent.py")))
		}, false},
		{"source directory removed", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(dir))
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp := tempDir(t)
			dir := filepath.Join(tmp, "agent")
			module, _ := agentRepo(t, dir)
			home := filepath.Join(tmp, "home")
			require.NoError(t, os.MkdirAll(home, 0o755))
			writeFile(t, filepath.Join(dir, hermesIncomplete), "")
			g, err := New(Options{ModulePath: module, HomeDir: home})
			require.NoError(t, err)
			require.NoError(t, checkWithin(t, g))

			tc.fault(t, dir)
			for i := 0; i < 2; i++ { // the read, then the fast path
				err := checkWithin(t, g)
				if !tc.stale {
					assert.NoError(t, err)
					continue
				}
				var se *StaleError
				require.ErrorAs(t, err, &se)
				want := UpdateIncomplete
				if _, statErr := os.Stat(filepath.Join(dir, hermesIncomplete)); statErr != nil {
					want = UpdateUnverified // the fault removed the recovery marker with the checkout
				}
				assert.Equal(t, want, se.State)
			}
		})
	}
}

// A checkout with 100,000 packed refs: current while nothing moves, stale
// once the branch does.
func TestManyPackedRefs(t *testing.T) {
	dir := tempDir(t)
	module, rev := agentRepo(t, dir)
	var packed bytes.Buffer
	packed.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(&packed, "%s refs/tags/t%06d\n", rev, i)
	}
	fmt.Fprintf(&packed, "%s refs/tags/zz\n", rev)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "packed-refs"), packed.Bytes(), 0o644))
	git(t, dir, "pack-refs", "--all") // the branch joins them, sorted
	require.NoFileExists(t, filepath.Join(dir, ".git", "refs", "heads", "main"))

	g, err := New(Options{ModulePath: module, HomeDir: dir})
	require.NoError(t, err)
	assert.Equal(t, rev, g.Identity().Revision)
	assert.NoError(t, checkWithin(t, g))
	commit(t, dir, "run_agent.py", "moved\n")
	assert.ErrorIs(t, checkWithin(t, g), ErrStale)
}

// treeDigest lists every file under root with its mode and a hash of its
// content: what a read-only guard must leave as it was.
func treeDigest(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", p, info.Mode())
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		out = append(out, line)
		return nil
	})
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// Thousands of checks and classifications leave the checkout, its .git and
// the home byte-identical, with no file created.
func TestGuardIsReadOnly(t *testing.T) {
	tmp := tempDir(t)
	dir, home := filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
	module, _ := agentRepo(t, dir)
	writeFile(t, filepath.Join(dir, hermesLazy), "")
	writeMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
	g, err := New(Options{ModulePath: module, HomeDir: home, Python: filepath.Join(tmp, "venv", "bin", "python")})
	require.NoError(t, err)
	commit(t, dir, "run_agent.py", "moved\n") // stale: the update state is read too

	before := treeDigest(t, tmp)
	for i := 0; i < 2000; i++ {
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		require.Equal(t, MarkerActive, readMarker(filepath.Join(home, hermesMarker)))
	}
	for i := 0; i < 200; i++ {
		_, err := gitread.Inspect(module)
		require.NoError(t, err)
		_ = g.Observe()
	}
	assert.Equal(t, before, treeDigest(t, tmp))
}
