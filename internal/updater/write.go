package updater

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/durable"
)

// WriteMarker writes the in-progress marker at path for process pid, which
// started the update at started: line 1 the process ID, line 2 the Unix
// time in seconds. It makes the marker's directory if it is missing. With
// replace false the marker must not exist (an error matching fs.ErrExist
// says another updater wrote one first); with replace true it replaces a
// marker the caller found stale.
func WriteMarker(path string, pid int, started time.Time, replace bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	body := markerBody(pid, started)
	if replace {
		return durable.WriteFile(path, body, 0o644)
	}
	return durable.CreateFile(path, body, 0o644)
}

func markerBody(pid int, started time.Time) []byte {
	return []byte(fmt.Sprintf("%d\n%.6f\n", pid, float64(started.UnixNano())/1e9))
}

// RemoveMarker removes the marker at path only if it is the one
// WriteMarker wrote for pid and started: a marker another updater wrote
// since (one that found this one stale) is left to it. It reports whether
// it removed the marker.
func RemoveMarker(path string, pid int, started time.Time) (bool, error) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxMarkerBytes {
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return false, err
	}
	data, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(data, markerBody(pid, started)) {
		return false, err
	}
	return true, os.Remove(path)
}

// NewUpdateID returns a fresh update_id: 16 random hex digits.
func NewUpdateID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	return hex.EncodeToString(b[:])
}

// WriteReceipt writes r, atomically and durably, at latest and, once the
// run has finished, as update_<time>_<pid>_<update_id>.json beside it: the
// receipt of every run is kept, the latest one is where readers look. It
// makes the receipts' directory if it is missing.
func WriteReceipt(latest string, r Receipt, pid int) error {
	if r.Schema == 0 {
		r.Schema = ReceiptSchema
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	dir := filepath.Dir(latest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if !r.FinishedAt.IsZero() {
		name := fmt.Sprintf("update_%s_%d_%s.json", r.StartedAt.UTC().Format("20060102T150405Z"), pid, r.UpdateID)
		if err := durable.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return durable.WriteFile(latest, data, 0o644)
}
