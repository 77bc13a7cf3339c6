package durable

import (
	"os"
	"path/filepath"
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
