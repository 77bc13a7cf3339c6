package updater

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// A lock path below a regular file names no file there can be: no updater
// can hold it (its own open fails), so it is free, not held, whether the
// probe follows links or not.
func TestProbeCheckoutLockBelowAFile(t *testing.T) {
	file := filepath.Join(gittest.TempDir(t), "README")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	for _, follow := range []bool{false, true} {
		state, why := ProbeCheckoutLock(filepath.Join(file, "hermes-update.lock"), follow)
		assert.Equal(t, LockFree, state, "follow %v: %s", follow, why)
		assert.Contains(t, why, "no lock file", "follow %v", follow)
	}
}
