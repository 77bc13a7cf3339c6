//go:build unix || windows

package updater

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A marker path through a file proves nothing on every platform: it is not
// the absence of a marker, which a path through a directory that exists
// would be.
func TestSafeOpenThroughAFileIsUnusable(t *testing.T) {
	dir := tempDir(t)
	file := filepath.Join(dir, "home")
	require.NoError(t, os.WriteFile(file, []byte("a file, not a home\n"), 0o644))
	for _, path := range []string{filepath.Join(file, markerName), filepath.Join(file, "x", markerName)} {
		body, kind, why := SafeOpen(path, MaxMarkerBytes)
		assert.Nil(t, body)
		assert.Equal(t, FileUnusable, kind, "SafeOpen(%q) = %v %q, want unusable", path, kind, why)
		assert.NotEmpty(t, why)
	}
	body, kind, _ := SafeOpen(filepath.Join(dir, "missing", markerName), MaxMarkerBytes)
	assert.Nil(t, body)
	assert.Equal(t, FileAbsent, kind, "a path through nothing is absent")
}
