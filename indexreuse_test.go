package runtimeguard

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/fsread"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// readCounter wraps a guard's file system and counts the reads (whole, or
// opened for a read through a buffer) of one file.
type readCounter struct {
	mu    sync.Mutex
	path  string
	reads int
}

func (c *readCounter) wrap(fs *gitread.FS) *gitread.FS {
	w := *fs
	w.ReadFile = func(p string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		c.count(p)
		return fs.ReadFile(p, limit, nofollow)
	}
	if fs.Open != nil {
		w.Open = func(p string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
			c.count(p)
			return fs.Open(p, limit, nofollow)
		}
	}
	return &w
}

func (c *readCounter) count(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p == c.path {
		c.reads++
	}
}

func (c *readCounter) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// A read after a change that left the index as it was (pack-refs, a
// branch made, HEAD's revision and the index unchanged) does not read the
// index again, on every path: its answer is the last read's. A change of
// the index is read, and what changed is seen.
func TestUnchangedIndexIsNotReadAgain(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			dir := tempDir(t)
			initRepo(t, dir, map[string]string{"run_agent.py": "x = 1\n", "lib.py": "y\n"})
			rev := commit(t, dir, "lib.py", "y = 2\n")
			module := filepath.Join(dir, "run_agent.py")
			// Files older than the margin of the racy rule, on the real
			// clock too.
			time.Sleep(250 * time.Millisecond)
			reads := &readCounter{path: filepath.Join(dir, ".git", "index")}
			e := mode.env(t)
			e.git = reads.wrap(e.git)
			g := bindFast(t, module, e)
			require.Equal(t, rev, g.Identity().Revision)
			if mode.name == "watch" {
				require.NoError(t, g.EnsureCurrent())
				require.True(t, onWatchPath(g), "a checkout on a local file system is watched")
			}
			bound, before := g.Stats().FullReads, reads.n()
			require.NotZero(t, before, "binding read the index")

			for _, change := range [][]string{{"pack-refs", "--all"}, {"branch", "topic"}, {"tag", "v1"}} {
				git(t, dir, change...)
				require.NoError(t, g.EnsureCurrent(), "after git %v", change)
			}
			require.Greater(t, g.Stats().FullReads, bound, "the changes were read")
			assert.Equal(t, before, reads.n(), "the unchanged index was read again")

			git(t, dir, "rm", "-q", "--cached", "run_agent.py")
			assert.ErrorIs(t, g.EnsureCurrent(), ErrStale, "the index changed: the module is no longer tracked")
			assert.Greater(t, reads.n(), before, "the changed index was read")
		})
	}
}

// An index rewritten in place, with the same size, in the same timestamp
// tick as the read that found it keeps its stamp: its answer is not taken
// again (Git's racy rule, as for every stamp), and the next read reads it
// and sees the module gone from it.
func TestSameTickIndexRewriteIsRead(t *testing.T) {
	dir := tempDir(t)
	initRepo(t, dir, map[string]string{"run_agent.py": "x = 1\n", "lib.py": "y\n"})
	module := filepath.Join(dir, "run_agent.py")
	index := filepath.Join(dir, ".git", "index")
	fi, err := os.Stat(index)
	require.NoError(t, err)
	e := testEnv(nil)
	e.now = fi.ModTime // every read begins in the tick the index was written
	e.git = frozenStamps()
	e.git.Open, e.git.ReadEnds = gitread.System.Open, gitread.System.ReadEnds
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	require.NotEmpty(t, g.Identity().Revision)
	require.NoError(t, g.EnsureCurrent())

	// The module's entry renamed in place: the same size, the same
	// order; git reads the index and no longer finds the module.
	data, err := os.ReadFile(index)
	require.NoError(t, err)
	at := bytes.Index(data, []byte("run_agent.py\x00"))
	require.Positive(t, at)
	f, err := os.OpenFile(index, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("run_agent.pz"), int64(at))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Error(t, gittest.Command(dir, "ls-files", "--error-unmatch", "run_agent.py").Run(), "git no longer finds the module")
	require.NoError(t, gittest.Command(dir, "ls-files", "--error-unmatch", "run_agent.pz").Run(), "git reads the index")

	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
}

// With Options.Check "read" every check reads the index too: no stamp is trusted.
func TestCheckReadReadsTheIndex(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	reads := &readCounter{path: filepath.Join(dir, ".git", "index")}
	e := settledEnv()
	e.git = reads.wrap(e.git)
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t), Check: "read"}, e)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		before := reads.n()
		require.NoError(t, g.EnsureCurrent())
		assert.Equal(t, before+1, reads.n(), "check %d read the index", i)
	}
}
