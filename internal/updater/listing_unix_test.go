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
// be is an answer at once, never a listing that waits for a writer of the
// FIFO. Where the history would be, a FIFO or a file holds no receipts;
// where a marker's directory would be, it is why the listing failed.
func TestListingsOfAFIFOReturn(t *testing.T) {
	base := tempDir(t)
	fifo, file := filepath.Join(base, "fifo"), filepath.Join(base, "file")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	receipts := func(dir string) func() string {
		return func() string {
			return ListReceipts([]ReceiptSource{{History: filepath.Join(dir, ReceiptHistoryPattern)}}).Problem
		}
	}
	for _, tc := range []struct {
		name    string
		list    func() string
		problem string // what the answer contains; "" for none
	}{
		{"the receipts' history is a FIFO", receipts(fifo), ""},
		{"the receipts' history is a file", receipts(file), ""},
		{"a marker's directory is a FIFO", func() string {
			_, why := ListArtifacts(fifo, ".update.lock")
			return why
		}, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan string, 1)
			go func() { done <- tc.list() }()
			select {
			case why := <-done:
				if tc.problem == "" {
					assert.Empty(t, why)
				} else {
					assert.Contains(t, why, tc.problem)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the listing waits on a FIFO")
			}
		})
	}
}
