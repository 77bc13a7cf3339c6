//go:build unix

package updater

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Every directory the updater's files are listed in may be something
// else: a FIFO where the receipts' history or a marker's directory would
// be is an answer at once (no receipts there, or why the listing failed),
// never a listing that waits for a writer of the FIFO.
func TestListingsOfAFIFOReturn(t *testing.T) {
	base := tempDir(t)
	fifo := filepath.Join(base, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	for _, tc := range []struct {
		name string
		list func() string
	}{
		{"the receipts' history", func() string {
			return ListReceipts([]ReceiptSource{{History: filepath.Join(fifo, ReceiptHistoryPattern)}}).Problem
		}},
		{"a marker's artifacts", func() string {
			_, why := ListArtifacts(fifo, ".update.lock")
			return why
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan string, 1)
			go func() { done <- tc.list() }()
			select {
			case why := <-done:
				t.Logf("answered: %q", why)
			case <-time.After(10 * time.Second):
				t.Fatal("the listing waits on a FIFO")
			}
		})
	}
	_, err := os.Stat(fifo)
	assert.NoError(t, err)
}
