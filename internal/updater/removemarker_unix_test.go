//go:build unix

package updater

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RemoveMarker stats the marker, renames it aside, then reads what it
// renamed: a FIFO swapped in between the stat and the rename is what it
// reads, and is never waited on. A writer swaps a regular file and a FIFO
// at the marker's path as fast as it can while RemoveMarker is called
// again and again.
func TestRemoveMarkerNeverWaitsOnAFIFOSwappedIn(t *testing.T) {
	dir := tempDir(t)
	path := filepath.Join(dir, ".update_check")
	stop := make(chan struct{})
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		reg, fifo := filepath.Join(dir, "r"), filepath.Join(dir, "f")
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.WriteFile(reg, []byte("x"), 0o644)
			_ = unix.Mkfifo(fifo, 0o644)
			_ = os.Rename(reg, path)
			_ = os.Rename(fifo, path)
		}
	}()
	defer func() { close(stop); <-swapped }()
	for i, end := 0, time.Now().Add(2*time.Second); time.Now().Before(end); i++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = RemoveMarker("", path, 999999, time.Unix(1, 0))
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("RemoveMarker waits on a FIFO (call %d)", i)
		}
	}
}
