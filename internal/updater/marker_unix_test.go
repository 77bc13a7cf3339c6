//go:build unix

package updater

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// recoveryNames are the Hermes updater's recovery markers.
var recoveryNames = []string{incomplete, lazy}

// mkfifo makes a FIFO at path.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, unix.Mkfifo(path, 0o644))
}

// The descriptor check, reached when the path changes between the lstat and
// the open: the open itself must not block on a FIFO.
func TestSafeOpenRejectsFIFODescriptor(t *testing.T) {
	fifo := filepath.Join(tempDir(t), "fifo")
	mkfifo(t, fifo)
	fd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	require.NoError(t, err, "a non-blocking open of a FIFO returns at once")
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	assert.NotEqual(t, uint32(unix.S_IFREG), uint32(st.Mode)&unix.S_IFMT)
	unix.Close(fd)
}

func TestRecoveryMarkerErrorIsUnknown(t *testing.T) {
	dir := tempDir(t)
	notDir := filepath.Join(dir, "file")
	writeFile(t, notDir, "")
	// A root that is a file: looking inside it fails with ENOTDIR, not
	// "does not exist".
	_, ok := RecoveryMarkers([]string{dir, notDir}, recoveryNames)
	assert.False(t, ok, "a root that is a file cannot be searched")
	// Found before the error, still not searched.
	writeFile(t, filepath.Join(dir, incomplete), "")
	present, ok := RecoveryMarkers([]string{dir, notDir}, recoveryNames)
	assert.False(t, ok)
	assert.Equal(t, []string{filepath.Join(dir, incomplete)}, present)
	present, ok = RecoveryMarkers([]string{dir}, recoveryNames)
	assert.True(t, ok)
	assert.Equal(t, []string{filepath.Join(dir, incomplete)}, present)
}
