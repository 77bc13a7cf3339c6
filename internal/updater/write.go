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
	"sync"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/durable"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// ErrMarkerHeld is the error of ClaimMarker when another update holds the
// marker, or something at its path proves nothing.
var ErrMarkerHeld = errors.New("the update marker is held")

// Judge is the classification of the marker that a claim obeys: a guard's
// own (Env.Judge), so that a claim replaces only a marker a guard reads as
// stale and yields to anything a guard does not read as absent.
type Judge interface {
	// Read classifies the marker at path, with what lies beside it.
	Read(path string) Verdict
	// Marker reads the marker at path and judges it, with what lies
	// beside it: body is the file's bytes where a guard read them as
	// stale; stale whether it did; held, when a guard reads them as
	// neither absent nor stale, what it proves and why ("a live update
	// (process 12 is alive)").
	Marker(path string) (body []byte, stale bool, held string)
	// Beside judges what lies beside the marker at path, whatever the
	// marker itself is: why it holds the marker (a release in flight, an
	// updater's unresolved cleanup), "" when nothing there counts.
	Beside(path string) string
}

// ClaimMarker writes the in-progress marker at path for process pid, which
// started the update at started (line 1 the process ID, line 2 the Unix
// time in seconds, line 3 the process's creation time: MarkerBody), as exclusively where a stale marker was as where none
// was: of any number of updaters started at once, one claims it. A marker
// is stale, active or unknown as judge reads it. A stale marker is first
// renamed aside as a release of this process (so that a reader sees an
// update in flight meanwhile), and replaced only if the file renamed holds
// the bytes judged stale; a marker that is active or unknown, a release in
// flight, or an updater's other artifact refuses with an error matching
// ErrMarkerHeld that names it. The marker's directory is opened from home
// (made where missing), and every write made in it, as durable.OpenIn
// opens it: nothing is written where a link below home leads.
func ClaimMarker(home, path string, pid int, started time.Time, judge Judge) error {
	return claimMarker(durable.Root{Path: home}, path, pid, started, judge, nil, func(string, time.Duration) {})
}

// claimMarker is ClaimMarker in the root home, which may be pinned, telling
// holds of the sidecar lock it takes and step again once it holds it and
// before each flush (see Update).
func claimMarker(home durable.Root, path string, pid int, started time.Time, judge Judge, holds func(*os.File), step func(string, time.Duration)) error {
	d, err := home.OpenIn(filepath.Dir(path), true)
	if err != nil {
		return err
	}
	defer d.Close()
	name := filepath.Base(path)
	// Claims are serialized by the updater's own sidecar lock beside the
	// marker (see MarkerLockSuffix): a claim reads the directory and the
	// marker in steps no reader can take at once (a claim renamed aside
	// by another, and put back, reads as none for an instant), so two
	// claims at a time could both win. An updater that takes no such lock
	// (Hermes's Python updater) is not serialized by it, and the renames
	// and comparisons below are all it has.
	unlock, err := lockMarker(d, name, holds)
	if err != nil {
		return err
	}
	defer unlock()
	step("the marker "+path, 0) // the wait for the sidecar is over
	d.Flushing = func() { step("the marker "+path, 0) }
	body := markerBodyOf(pid, started)
	for try := 0; try < 3; try++ {
		// The bytes judged are the bytes compared after the rename, not
		// an earlier read: the file may be another updater's claim by
		// then.
		stale, isStale, held := judge.Marker(path)
		switch {
		case held != "":
			return fmt.Errorf("%w: %s names %s", ErrMarkerHeld, path, held)
		case isStale:
			aside := filepath.Base(releaseName(path, os.Getpid()))
			if err := d.Rename(name, aside); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return err
			}
			moved, kind, _ := SafeOpen(filepath.Join(d.Path(), aside), MaxMarkerBytes)
			if kind != FileRead || !bytes.Equal(moved, stale) {
				// Another updater's marker, written since: put it back,
				// unless yet another took the path meanwhile.
				if err := d.Link(aside, name); err != nil && !errors.Is(err, fs.ErrExist) {
					return fmt.Errorf("restoring the update marker %s from %s: %w", path, aside, err)
				}
				_ = d.Remove(aside)
				continue
			}
			err := d.CreateFile(name, body, 0o644)
			_ = d.Remove(aside)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			if err != nil {
				return err
			}
		default:
			err := d.CreateFile(name, body, 0o644)
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			if err != nil {
				return err
			}
		}
		// Ours now; an artifact of another updater's beside it means
		// that one is claiming or releasing at the same time: yield.
		if why := judge.Beside(path); why != "" {
			_, _ = removeMarker(d, name, pid, started)
			return fmt.Errorf("%w: %s", ErrMarkerHeld, why)
		}
		return nil
	}
	return fmt.Errorf("%w: %s kept changing while it was claimed", ErrMarkerHeld, path)
}

// MarkerBody is a marker of the updater's current format for process pid,
// started at started, created at created (CreationTime; "" where it
// cannot be told): its process ID, the Unix time in whole seconds (the
// updater's own reader takes nothing else) and "ct:" and the creation
// time, each on a line of its own.
func MarkerBody(pid int, started time.Time, created string) []byte {
	body := fmt.Sprintf("%d\n%d\n", pid, started.Unix())
	if created != "" {
		body += "ct:" + created + "\n"
	}
	return []byte(body)
}

// ownCreated is this process's creation time as a marker records it, read
// once: two readings may round to different milliseconds.
var ownCreated = sync.OnceValue(func() string { return CreationTime(os.Getpid()) })

// identityOf is process pid as a marker or a receipt names it: this
// process's own identity, read once, or the process's creation time read
// now.
func identityOf(pid int) Identity {
	if pid == os.Getpid() {
		return OwnIdentity()
	}
	return processIdentity(pid)
}

// markerBodyOf is the marker ClaimMarker writes for process pid.
func markerBodyOf(pid int, started time.Time) []byte {
	created := ""
	if pid == os.Getpid() {
		created = ownCreated()
	} else {
		created = CreationTime(pid)
	}
	return MarkerBody(pid, started, created)
}

// RemoveMarker removes the marker at path only if it is the one
// ClaimMarker wrote for pid and started: a marker another updater wrote
// since (one that found this one stale) is left to it. It releases the
// marker as Hermes's updater does, renaming it aside first, so that no
// reader sees the path free before the file there is known to be ours,
// and holding the updater's sidecar lock as a claim does (a sidecar held
// past claimLockWait leaves the marker, with an error matching
// ErrMarkerHeld). Its directory is opened from home as ClaimMarker opens
// it. It reports whether it removed the marker.
func RemoveMarker(home, path string, pid int, started time.Time) (bool, error) {
	return removeMarkerIn(durable.Root{Path: home}, path, pid, started, nil)
}

// removeMarkerIn is RemoveMarker in the root home, which may be pinned.
func removeMarkerIn(home durable.Root, path string, pid int, started time.Time, holds func(*os.File)) (bool, error) {
	d, err := home.OpenIn(filepath.Dir(path), false)
	if err != nil {
		return false, err
	}
	defer d.Close()
	name := filepath.Base(path)
	unlock, err := lockMarker(d, name, holds)
	if err != nil {
		return false, err
	}
	defer unlock()
	return removeMarker(d, name, pid, started)
}

// removeMarker is RemoveMarker of the entry name of d, the sidecar lock
// held.
func removeMarker(d *durable.Dir, name string, pid int, started time.Time) (bool, error) {
	fi, err := d.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxMarkerBytes {
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return false, err
	}
	path := filepath.Join(d.Path(), name)
	aside := filepath.Base(releaseName(path, os.Getpid()))
	if err := d.Rename(name, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return false, err
	}
	// What was renamed aside may not be what was statted: read it as a
	// marker is read, never waiting on a FIFO swapped in.
	data, _, err := fsread.ReadRegular(filepath.Join(d.Path(), aside), MaxMarkerBytes, true)
	if err != nil || !bytes.Equal(data, markerBodyOf(pid, started)) {
		if lerr := d.Link(aside, name); lerr != nil && !errors.Is(lerr, fs.ErrExist) {
			return false, fmt.Errorf("restoring the update marker %s from %s: %w", path, aside, lerr)
		}
		return false, errors.Join(err, d.Remove(aside))
	}
	return true, d.Remove(aside)
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
// one is where readers look first. The receipt names its writer, process
// pid, and that process's creation time where this platform tells it (the
// keys pid and pid_create_time, as Hermes's writer names its own). The
// receipts' directory is opened from home (made where missing), and every
// write and removal made in it, as durable.OpenIn opens it: nothing is
// written or removed where a link below home leads.
func WriteReceipt(home, latest string, r Receipt, pid int) error {
	return writeReceipt(durable.Root{Path: home}, latest, r, pid, func(string, time.Duration) {})
}

// writeReceipt is WriteReceipt in the root home, which may be pinned,
// telling step of each write and removal (see Update.Step).
func writeReceipt(home durable.Root, latest string, r Receipt, pid int, step func(string, time.Duration)) error {
	f := receiptFile{
		Schema: ReceiptSchema, UpdateID: r.UpdateID, CorrelationID: r.CorrelationID, Outcome: r.Outcome,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		PreUpdate: codeState{r.From}, PostUpdate: codeState{r.To}, Checkout: r.Checkout, CheckoutID: r.CheckoutID,
		PID: int64(pid),
	}
	if w := identityOf(pid); w.HasCreated {
		f.PIDCreateTime = &w.Created
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	dir := filepath.Dir(latest)
	step("the receipts' directory "+dir, 0)
	d, err := home.OpenIn(dir, true)
	if err != nil {
		return err
	}
	defer d.Close()
	if !r.FinishedAt.IsZero() {
		own := filepath.Join(dir, ReceiptFileName(&r, pid))
		step("the receipt "+own, 0)
		d.Flushing = func() { step("the receipt "+own, 0) } // each flush a wait of its own
		if err := d.WriteFile(filepath.Base(own), data, 0o644); err != nil {
			return err
		}
		defer pruneReceipts(d, ReceiptHistoryPattern, step)
	}
	step("the receipt "+latest, 0)
	d.Flushing = func() { step("the receipt "+latest, 0) }
	return d.WriteFile(filepath.Base(latest), data, 0o644)
}

// MarkerLockSuffix names, after the marker's path, the updater's sidecar
// lock: Hermes's marker.sh (its rule A7) takes flock(2) on <marker>.lock
// exclusively for every read, judgement and write or removal of the
// marker, and never deletes it. ClaimMarker and RemoveMarker take it the
// same way, so that their claims and the updater's exclude each other;
// the file stays, as the updater leaves it.
const MarkerLockSuffix = ".lock"

// claimLockWait bounds the wait for the sidecar lock another claim or
// release holds: marker.sh waits 10 s, then fails closed.
var claimLockWait = 10 * time.Second

// lockMarker takes the sidecar lock of the marker name of d exclusively,
// waiting at most claimLockWait for another holder to let it go, and
// tells holds (if not nil) of the file it holds (see Update.Holds).
func lockMarker(d *durable.Dir, marker string, holds func(*os.File)) (func(), error) {
	name := marker + MarkerLockSuffix
	deadline := time.Now().Add(claimLockWait)
	for {
		f, err := lockIn(d, name, true)
		if err == nil {
			if holds != nil {
				holds(f)
			}
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, ErrLocked) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: another claim or release of the marker holds %s", ErrMarkerHeld, filepath.Join(d.Path(), name))
		}
		time.Sleep(2 * time.Millisecond)
	}
}
