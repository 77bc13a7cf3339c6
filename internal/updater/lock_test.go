package updater

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lock held exclusively refuses every other lock; shared locks admit
// each other and refuse an exclusive one. Each Lock is its own open file,
// so two in one process conflict as two processes would.
func TestLock(t *testing.T) {
	path := filepath.Join(tempDir(t), "update.lock")
	ex, err := Lock("", path, true)
	require.NoError(t, err)
	_, err = Lock("", path, false)
	assert.True(t, errors.Is(err, ErrLocked), "a shared lock while one is held exclusively: %v", err)
	_, err = Lock("", path, true)
	assert.ErrorIs(t, err, ErrLocked)
	require.NoError(t, ex.Close())

	sh1, err := Lock("", path, false)
	require.NoError(t, err)
	sh2, err := Lock("", path, false)
	require.NoError(t, err, "two shared locks")
	_, err = Lock("", path, true)
	assert.ErrorIs(t, err, ErrLocked, "an exclusive lock while shared ones are held")
	require.NoError(t, sh1.Close())
	require.NoError(t, sh2.Close())
	ex, err = Lock("", path, true)
	require.NoError(t, err, "an exclusive lock once the shared ones are released")
	require.NoError(t, ex.Close())
}
