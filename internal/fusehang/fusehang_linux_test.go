package fusehang

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The file system answers until Hang, then a call through it blocks until
// the test ends, and the teardown releases it.
func TestHangs(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	f := Mount(t, mnt, map[string]string{"link": dir})
	target, err := os.Readlink(filepath.Join(mnt, "link"))
	require.NoError(t, err)
	assert.Equal(t, dir, target)
	_, err = os.Lstat(filepath.Join(mnt, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	entries, err := os.ReadDir(mnt)
	require.NoError(t, err, "the directory is listed, as a directory of a real file system is")
	require.Len(t, entries, 1)
	assert.Equal(t, "link", entries[0].Name())
	assert.Equal(t, os.ModeSymlink, entries[0].Type())

	f.Hang()
	done := make(chan error, 1)
	go func() {
		_, err := os.Lstat(filepath.Join(mnt, "link"))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("an lstat on the hung file system returned: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	assert.Equal(t, 1, f.Pending())
	f.tearDown()
	select {
	case err := <-done:
		assert.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the teardown did not release the blocked lstat")
	}
}
