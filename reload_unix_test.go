//go:build unix

package runtimeguard

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A FIFO at the receipt's path is refused at once.
func TestPlanReloadFIFOReceipt(t *testing.T) {
	c := newReloadCase(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(c.receiptPath()), 0o755))
	mkfifo(t, c.receiptPath())
	done := make(chan error, 1)
	go func() { _, err := c.g.PlanReload(); done <- err }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "named pipe")
	case <-time.After(10 * time.Second):
		t.Fatal("PlanReload blocked on a FIFO receipt")
	}
}
