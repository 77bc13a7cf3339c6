package gitread

import (
	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingFS is System, counting the reads of each file (whole or
// opened for a read through a buffer).
type countingFS struct {
	FS
	mu    sync.Mutex
	reads map[string]int
}

func newCountingFS() *countingFS {
	c := &countingFS{reads: map[string]int{}}
	c.FS = *System
	c.FS.ReadFile = func(p string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		c.count(p)
		return System.ReadFile(p, limit, nofollow)
	}
	c.FS.Open = func(p string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
		c.count(p)
		return System.Open(p, limit, nofollow)
	}
	return c
}

func (c *countingFS) count(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads[p]++
}

func (c *countingFS) readsOf(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[p]
}

// A read given the index of an earlier read takes its answer where the
// index is the same file with the same stamp, for the same module path:
// it does not read the index; any change of the index, or another module
// path, reads it again, and finds what changed.
func TestReadWithTakesAnUnchangedIndex(t *testing.T) {
	dir := tempDir(t)
	rev := initRepo(t, dir, map[string]string{"run_agent.py": "x\n", "lib.py": "y\n"})
	module := filepath.Join(dir, "run_agent.py")
	index := filepath.Join(dir, ".git", "index")
	fsys := newCountingFS()

	c, deps, _, first, err := ReadWith(&fsys.FS, module, Ask{MustExist: true})
	require.NoError(t, err)
	require.Equal(t, rev, c.Revision)
	require.NotNil(t, first, "a read that read the index returns it")
	require.Equal(t, 1, fsys.readsOf(index))
	assert.True(t, hasDep(deps, index), "the index is a dependency")

	git(t, dir, "pack-refs", "--all")
	c, deps, _, again, err := ReadWith(&fsys.FS, module, Ask{MustExist: true, Prev: first})
	require.NoError(t, err)
	assert.Equal(t, rev, c.Revision)
	assert.True(t, c.Tracked)
	assert.Equal(t, 1, fsys.readsOf(index), "an unchanged index is not read again")
	assert.Same(t, first, again, "the answer taken again is the earlier read's")
	assert.True(t, hasDep(deps, index), "an index taken again is still a dependency")

	// Another module path in the same checkout: the index is read.
	_, _, _, other, err := ReadWith(&fsys.FS, filepath.Join(dir, "lib.py"), Ask{MustExist: true, Prev: first})
	require.NoError(t, err)
	assert.Equal(t, 2, fsys.readsOf(index), "the index is read for another module path")
	assert.NotSame(t, first, other)

	// A changed index is read, and what changed is found.
	git(t, dir, "rm", "-q", "--cached", "run_agent.py")
	c, _, _, changed, err := ReadWith(&fsys.FS, module, Ask{MustExist: true, Prev: first})
	require.NoError(t, err)
	assert.Equal(t, 3, fsys.readsOf(index), "a changed index is read again")
	assert.False(t, c.Tracked, "the module is no longer tracked")
	assert.Empty(t, c.Revision)
	require.NotNil(t, changed)
	assert.NotSame(t, first, changed)

	// An index removed is nothing: no answer to take again.
	require.NoError(t, os.Remove(index))
	c, _, _, gone, err := ReadWith(&fsys.FS, module, Ask{MustExist: true, Prev: changed})
	require.NoError(t, err)
	assert.False(t, c.Tracked)
	assert.Nil(t, gone, "no index, no answer")
}

// The reader reads an index the same through Open (a buffer) as through
// ReadFile (whole): the same answer, the same stamp.
func TestIndexReadWholeOrStreamed(t *testing.T) {
	dir := tempDir(t)
	rev := initRepo(t, dir, map[string]string{"run_agent.py": "x\n", "lib.py": "y\n"})
	module := filepath.Join(dir, "run_agent.py")
	whole := *System
	whole.Open = nil
	for _, fsys := range []*FS{System, &whole} {
		c, deps, _, idx, err := ReadWith(fsys, module, Ask{MustExist: true})
		require.NoError(t, err)
		assert.Equal(t, rev, c.Revision)
		require.NotNil(t, idx)
		st, err := fsread.StatStamp(filepath.Join(dir, ".git", "index"))
		require.NoError(t, err)
		assert.Equal(t, st, idx.stamp)
		assert.True(t, hasDep(deps, filepath.Join(dir, ".git", "index")))
	}
}

func hasDep(deps Deps, path string) bool {
	for _, d := range deps {
		if d.Path == path {
			return true
		}
	}
	return false
}

// An index that shrinks or grows while it is read through the buffer is a
// read failure of the ErrChanged class (a later read may succeed), never
// a failure decided by its content, even where the bytes read are no
// index: the change is what the read says.
func TestIndexChangedWhileStreamed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string, size int64)
	}{
		{"shrank", func(t *testing.T, path string, size int64) { require.NoError(t, os.Truncate(path, size/2)) }},
		{"grew", func(t *testing.T, path string, size int64) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write(make([]byte, 100))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempDir(t)
			initRepo(t, dir, map[string]string{"run_agent.py": "x\n", "lib.py": "y\n"})
			index := filepath.Join(dir, ".git", "index")
			fsys := *System
			fsys.Open = func(p string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
				f, st, err := System.Open(p, limit, nofollow)
				if err == nil && f != nil && p == index {
					tc.change(t, p, st.Size())
				}
				return f, st, err
			}
			_, _, _, idx, err := ReadWith(&fsys, filepath.Join(dir, "run_agent.py"), Ask{MustExist: true})
			require.Error(t, err)
			assert.ErrorIs(t, err, fsread.ErrChanged)
			assert.False(t, FromContent(err), "a change while read is not decided by the content: %v", err)
			assert.Nil(t, idx)
		})
	}
}
