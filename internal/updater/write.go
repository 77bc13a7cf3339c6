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

// ErrMarkerHeld is the error of ClaimMarker when another update holds the
// marker, or something at its path proves nothing.
var ErrMarkerHeld = errors.New("the update marker is held")

// ClaimMarker writes the in-progress marker at path for process pid, which
// started the update at started (line 1 the process ID, line 2 the Unix
// time in seconds), as exclusively where a stale marker was as where none
// was: of any number of updaters started at once, one claims it. A stale
// marker is first renamed aside as a release of this process (so that a
// reader sees an update in flight meanwhile), and replaced only if the
// file renamed is the one judged stale; a marker that is active or
// unknown, a release in flight, or an updater's other artifact refuses
// with an error matching ErrMarkerHeld that names it. It makes the
// marker's directory if it is missing.
func (e *Env) ClaimMarker(path string, pid int, started time.Time, maxAge time.Duration) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// Claims are serialized by a lock of their own beside the marker: a
	// claim reads the directory and the marker in steps no reader can take
	// at once (a claim renamed aside by another, and put back, reads as
	// none for an instant), so two claims at a time could both win. An
	// updater that takes no such lock (Hermes's own) is not serialized by
	// it, and the renames and comparisons below are all it has.
	unlock, err := lockClaims(path + ClaimLockSuffix)
	if err != nil {
		return err
	}
	defer unlock()
	body := markerBody(pid, started)
	for try := 0; try < 3; try++ {
		m := e.ReadMarker(path, maxAge)
		switch m.State {
		case Active, Unknown:
			return fmt.Errorf("%w: %s is %s (%s)", ErrMarkerHeld, path, m.State, m.Reason)
		case Stale:
			// Judge the bytes that will be compared, not an earlier read:
			// the file may be another updater's claim by now.
			stale, kind, _ := e.Open(path, MaxMarkerBytes)
			if kind != FileRead {
				continue
			}
			if p, at, ok := ParseMarker(stale); !ok || e.classify(p, at, maxAge).State != Stale {
				continue
			}
			aside := releaseName(path, os.Getpid())
			if err := os.Rename(path, aside); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return err
			}
			moved, kind, _ := e.Open(aside, MaxMarkerBytes)
			if kind != FileRead || !bytes.Equal(moved, stale) {
				// Another updater's marker, written since: put it back,
				// unless yet another took the path meanwhile.
				if err := os.Link(aside, path); err != nil && !errors.Is(err, fs.ErrExist) {
					return fmt.Errorf("restoring the update marker %s from %s: %w", path, aside, err)
				}
				_ = os.Remove(aside)
				continue
			}
			err := durable.CreateFile(path, body, 0o644)
			_ = os.Remove(aside)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			if err != nil {
				return err
			}
		default:
			err := durable.CreateFile(path, body, 0o644)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			if err != nil {
				return err
			}
		}
		// Ours now; an artifact of another updater's beside it means
		// that one is claiming or releasing at the same time: yield.
		if a := e.markerArtifacts(path); a.State != Absent {
			_, _ = RemoveMarker(path, pid, started)
			return fmt.Errorf("%w: %s", ErrMarkerHeld, a.Reason)
		}
		return nil
	}
	return fmt.Errorf("%w: %s kept changing while it was claimed", ErrMarkerHeld, path)
}

func markerBody(pid int, started time.Time) []byte {
	return []byte(fmt.Sprintf("%d\n%.6f\n", pid, float64(started.UnixNano())/1e9))
}

// RemoveMarker removes the marker at path only if it is the one
// ClaimMarker wrote for pid and started: a marker another updater wrote
// since (one that found this one stale) is left to it. It releases the
// marker as Hermes's updater does, renaming it aside first, so that no
// reader sees the path free before the file there is known to be ours. It
// reports whether it removed the marker.
func RemoveMarker(path string, pid int, started time.Time) (bool, error) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxMarkerBytes {
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return false, err
	}
	aside := releaseName(path, os.Getpid())
	if err := os.Rename(path, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return false, err
	}
	data, err := os.ReadFile(aside)
	if err != nil || !bytes.Equal(data, markerBody(pid, started)) {
		if lerr := os.Link(aside, path); lerr != nil && !errors.Is(lerr, fs.ErrExist) {
			return false, fmt.Errorf("restoring the update marker %s from %s: %w", path, aside, lerr)
		}
		return false, errors.Join(err, os.Remove(aside))
	}
	return true, os.Remove(aside)
}

// NewUpdateID returns a fresh update_id: 16 random hex digits.
func NewUpdateID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	return hex.EncodeToString(b[:])
}

// WriteReceipt writes r, atomically and durably, at latest and, once the
// run has finished, as update_<time>_<pid>_<update_id>.json beside it: the
// receipts of the last 20 runs are kept (by modification time), the latest
// one is where readers look first. It makes the receipts' directory if it
// is missing.
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
		if err := durable.WriteFile(filepath.Join(dir, ReceiptFileName(&r, pid)), data, 0o644); err != nil {
			return err
		}
		defer pruneReceipts(dir, ReceiptHistoryPattern)
	}
	return durable.WriteFile(latest, data, 0o644)
}

// ClaimLockSuffix names, after the marker's path, the lock file that
// serializes the claims of ClaimMarker.
const ClaimLockSuffix = ".claim-lock"

// claimLockWait bounds the wait for another claim of the marker: a claim
// takes a few file operations.
const claimLockWait = 5 * time.Second

// lockClaims takes the claim lock at path exclusively, waiting at most
// claimLockWait for another claim to end.
func lockClaims(path string) (func(), error) {
	deadline := time.Now().Add(claimLockWait)
	for {
		f, err := Lock(path, true)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, ErrLocked) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: another claim of the marker holds %s", ErrMarkerHeld, path)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
