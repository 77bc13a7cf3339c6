package durable

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := gittest.TempDir(t)
	path := filepath.Join(dir, "state.json")
	require.NoError(t, WriteFile(path, []byte("one\n"), 0o600))
	require.NoError(t, WriteFile(path, []byte("two\n"), 0o644))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "two\n", string(data))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	if os.PathSeparator == '/' {
		assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "a temporary file was left behind")
}

// A failed write leaves the old file as it was and no temporary file.
func TestWriteFileFailureLeavesOldContent(t *testing.T) {
	dir := gittest.TempDir(t)
	path := filepath.Join(dir, "state.json")
	require.NoError(t, WriteFile(path, []byte("kept\n"), 0o644))
	// The rename fails: a directory is in the way of the target name.
	blocked := filepath.Join(dir, "blocked")
	require.NoError(t, os.MkdirAll(filepath.Join(blocked, "child"), 0o755))
	assert.Error(t, WriteFile(blocked, []byte("x"), 0o644))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "kept\n", string(data))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "a temporary file was left behind: %v", entries)
}

// A directory that does not exist is an error, not a file somewhere else.
func TestWriteFileMissingDirectory(t *testing.T) {
	assert.Error(t, WriteFile(filepath.Join(gittest.TempDir(t), "no", "such", "file"), nil, 0o644))
}

// CreateFile writes a file that is not there, refuses one that is, and of
// many processes creating the same path at once exactly one succeeds.
func TestCreateFileIsExclusive(t *testing.T) {
	dir := gittest.TempDir(t)
	path := filepath.Join(dir, "marker")
	require.NoError(t, CreateFile(path, []byte("first\n"), 0o644))
	err := CreateFile(path, []byte("second\n"), 0o644)
	require.ErrorIs(t, err, fs.ErrExist)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "first\n", string(data))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "a temporary file was left behind: %v", entries)

	for round := 0; round < 20; round++ {
		path := filepath.Join(dir, fmt.Sprint("race", round))
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := CreateFile(path, []byte(fmt.Sprintln(i)), 0o644)
				if err == nil {
					wins.Add(1)
				} else {
					assert.ErrorIs(t, err, fs.ErrExist)
				}
			}()
		}
		wg.Wait()
		require.Equal(t, int32(1), wins.Load(), "round %d", round)
	}
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 21, "a temporary file was left behind")
}
