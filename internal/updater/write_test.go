package updater

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A marker is created only where none is, replaced only when asked, reads
// back as what it says, and is removed only by the updater that wrote it.
func TestWriteAndRemoveMarker(t *testing.T) {
	path := filepath.Join(tempDir(t), "home", "marker")
	start := time.Unix(1700000000, 500000000)
	require.NoError(t, WriteMarker(path, 1234, start, false))
	pid, started, ok := ParseMarker(mustRead(t, path))
	require.True(t, ok)
	assert.Equal(t, int64(1234), pid)
	assert.InDelta(t, 1700000000.5, started, 1e-6)

	require.ErrorIs(t, WriteMarker(path, 5678, start, false), fs.ErrExist)
	removed, err := RemoveMarker(path, 5678, start)
	require.NoError(t, err)
	assert.False(t, removed, "another updater's marker")
	removed, err = RemoveMarker(path, 1234, start.Add(time.Second))
	require.NoError(t, err)
	assert.False(t, removed, "a marker of the same process ID, written at another time")
	assert.FileExists(t, path)

	require.NoError(t, WriteMarker(path, 5678, start, true), "a stale marker is replaced")
	removed, err = RemoveMarker(path, 1234, start)
	require.NoError(t, err)
	assert.False(t, removed, "the first updater leaves the marker of the one that replaced it")
	removed, err = RemoveMarker(path, 5678, start)
	require.NoError(t, err)
	assert.True(t, removed)
	assert.NoFileExists(t, path)

	removed, err = RemoveMarker(path, 5678, start)
	assert.NoError(t, err, "nothing there")
	assert.False(t, removed)
	require.NoError(t, os.Mkdir(path, 0o755))
	removed, err = RemoveMarker(path, 5678, start)
	assert.NoError(t, err)
	assert.False(t, removed, "a directory is no marker of ours")
	assert.DirExists(t, path)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}
