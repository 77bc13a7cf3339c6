//go:build unix

package runtimeguard

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newWithin runs New in a goroutine and fails the test if it does not
// return within a few seconds.
func newWithin(t *testing.T, opts Options) (*Guard, error) {
	t.Helper()
	type result struct {
		g   *Guard
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := New(opts)
		done <- result{g, err}
	}()
	select {
	case r := <-done:
		return r.g, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("New did not return")
		return nil, nil
	}
}

// gitPaths are the files a read opens, for a checkout whose branch is loose
// or packed, and a linked worktree's.
type gitPath struct {
	name   string
	layout string // "loose", "packed" or "worktree"
	rel    func(dir string) string
}

var gitPaths = []gitPath{
	{"HEAD", "loose", func(dir string) string { return filepath.Join(dir, ".git", "HEAD") }},
	{"the branch's loose ref", "loose", func(dir string) string { return filepath.Join(dir, ".git", "refs", "heads", "main") }},
	{"index", "loose", func(dir string) string { return filepath.Join(dir, ".git", "index") }},
	{"config", "loose", func(dir string) string { return filepath.Join(dir, ".git", "config") }},
	{"packed-refs", "packed", func(dir string) string { return filepath.Join(dir, ".git", "packed-refs") }},
	{"a linked worktree's .git file", "worktree", func(dir string) string { return filepath.Join(dir+"-wt", ".git") }},
	{"a linked worktree's commondir", "worktree", func(dir string) string {
		return filepath.Join(dir, ".git", "worktrees", filepath.Base(dir)+"-wt", "commondir")
	}},
	{"a linked worktree's HEAD", "worktree", func(dir string) string {
		return filepath.Join(dir, ".git", "worktrees", filepath.Base(dir)+"-wt", "HEAD")
	}},
}

// specialCheckout makes a checkout in the given layout and returns its
// directory and the module path a guard binds to.
func specialCheckout(t *testing.T, layout string) (dir, module string) {
	t.Helper()
	dir = filepath.Join(tempDir(t), "agent")
	module, _ = agentRepo(t, dir)
	switch layout {
	case "packed":
		git(t, dir, "pack-refs", "--all")
	case "worktree":
		git(t, dir, "worktree", "add", "-q", dir+"-wt", "-b", "wt")
		module = filepath.Join(dir+"-wt", "run_agent.py")
	}
	return dir, module
}

// replaceWith puts a special file at path in place of what is there.
func replaceWith(t *testing.T, kind, path string) {
	t.Helper()
	require.NoError(t, os.Remove(path))
	switch kind {
	case "fifo":
		mkfifo(t, path)
	case "socket":
		mksocket(t, path)
	case "link to /dev/null":
		symlink(t, os.DevNull, path)
	case "link to /dev/zero":
		symlink(t, "/dev/zero", path)
	}
}

// A special file at any path a read opens is a read failure, at once: a
// bound guard fails closed, New returns an error naming the path, and once
// the file is restored the next check is current again. Nothing blocks.
//
// One place is the exception, as it is for git: a HEAD link whose text is
// no ref name means that no repository is there. New then binds an inert
// guard, and git finds no repository either. A .git that is neither a
// directory nor a regular file is passed over by git before 2.54 and
// fatal to later versions: a read failure, and no git gives an answer.
func TestSpecialFilesAtGitPaths(t *testing.T) {
	for _, p := range gitPaths {
		for _, kind := range []string{"fifo", "socket", "link to /dev/null", "link to /dev/zero"} {
			t.Run(p.name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				dir, module := specialCheckout(t, p.layout)
				path := p.rel(dir)
				saved, err := os.ReadFile(path)
				require.NoError(t, err)
				g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
				require.NoError(t, err)
				require.NoError(t, checkWithin(t, g))

				replaceWith(t, kind, path)
				start := time.Now()
				assert.ErrorIs(t, checkWithin(t, g), ErrStale)
				assert.ErrorIs(t, checkWithin(t, g), ErrStale, "the next check")
				g2, err := newWithin(t, Options{ModulePath: module, HomeDir: tempDir(t)})
				noRepository := kind != "fifo" && kind != "socket" && p.name == "HEAD"
				if p.name == "a linked worktree's .git file" {
					_, _, _, ok := gitVerdict(t, module)
					assert.False(t, ok, "git finds a repository with %s at %s", kind, path)
				}
				if noRepository {
					require.NoError(t, err, "New with %s at %s", kind, path)
					assert.Empty(t, g2.Identity().Revision, "New with %s at %s", kind, path)
					_, _, _, ok := gitVerdict(t, module)
					assert.False(t, ok, "git finds a repository with %s at %s", kind, path)
				} else {
					assert.ErrorContains(t, err, path, "New with %s at %s", kind, path)
				}
				assert.Less(t, time.Since(start), 5*time.Second, "two checks and a New took too long")

				require.NoError(t, os.Remove(path))
				require.NoError(t, os.WriteFile(path, saved, 0o644))
				assert.NoError(t, checkWithin(t, g), "the check after the file was restored")
			})
		}
	}
}

// packed-refs as a link to /dev/zero, a device that never ends, is refused
// without reading it: no allocation toward the size limit.
func TestEndlessPackedRefsIsNotRead(t *testing.T) {
	dir, module := specialCheckout(t, "packed")
	g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
	require.NoError(t, err)
	replaceWith(t, "link to /dev/zero", filepath.Join(dir, ".git", "packed-refs"))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	assert.ErrorIs(t, checkWithin(t, g), ErrStale)
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "one check allocated %d bytes", after.TotalAlloc-before.TotalAlloc)
}
