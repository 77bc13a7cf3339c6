//go:build unix

package fsread

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// A FIFO where a directory is listed is refused at once: an open of it to
// read would wait for a writer that never comes.
func TestReadNamesRefusesAFIFO(t *testing.T) {
	fifo := filepath.Join(gittest.TempDir(t), "receipts")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := ReadNames(fifo, 10, func(string) bool { return true })
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, unix.ENOTDIR)
	case <-time.After(10 * time.Second):
		t.Fatal("ReadNames waits on a FIFO")
	}
}
