//go:build unix

package updater

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// sidecarJudge is a judge that, each time a claim asks it, tries the
// marker's sidecar lock from an open file of its own, as marker.sh's
// marker_locked takes it: held records whether it was held.
type sidecarJudge struct {
	Judge
	held []bool
}

func (j *sidecarJudge) Marker(path string) ([]byte, bool, string) {
	f, err := Lock("", path+MarkerLockSuffix, true)
	j.held = append(j.held, errors.Is(err, ErrLocked))
	if err == nil {
		f.Close()
	}
	return j.Judge.Marker(path)
}

// A claim reads, judges and writes the marker holding the updater's own
// sidecar lock, <marker>.lock, as marker.sh does for every mutation: so
// runtimeguard update and the updater's claims exclude each other. The
// sidecar is the updater's contract, never deleted; no lock of another
// name is left in the home.
func TestClaimHoldsTheUpdatersSidecarLock(t *testing.T) {
	home := tempDir(t)
	path := filepath.Join(home, ".hermes-update-in-progress")
	start := time.Now()
	j := &sidecarJudge{Judge: judgeOf(probedEnv(probeAlive()))}
	require.NoError(t, ClaimMarker("", path, os.Getpid(), start, j))
	require.NotEmpty(t, j.held)
	for i, held := range j.held {
		assert.True(t, held, "the sidecar was free as the claim judged the marker (look %d)", i)
	}
	removed, err := RemoveMarker("", path, os.Getpid(), start)
	require.NoError(t, err)
	assert.True(t, removed)
	entries, err := os.ReadDir(home)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{".hermes-update-in-progress.lock"}, names, "the home holds the updater's sidecar, and nothing else")

	// While the updater holds the sidecar (its claim, its release under
	// way), a claim waits for it, then refuses and writes nothing; so does
	// a release.
	defer func(wait time.Duration) { claimLockWait = wait }(claimLockWait)
	claimLockWait = 50 * time.Millisecond
	sidecar, err := Lock("", path+MarkerLockSuffix, true)
	require.NoError(t, err)
	err = ClaimMarker("", path, os.Getpid(), start, j)
	assert.ErrorIs(t, err, ErrMarkerHeld)
	assert.ErrorContains(t, err, path+MarkerLockSuffix)
	assert.NoFileExists(t, path)
	require.NoError(t, sidecar.Close())
	require.NoError(t, ClaimMarker("", path, os.Getpid(), start, j))
	sidecar, err = Lock("", path+MarkerLockSuffix, true)
	require.NoError(t, err)
	removed, err = RemoveMarker("", path, os.Getpid(), start)
	assert.ErrorIs(t, err, ErrMarkerHeld)
	assert.False(t, removed)
	assert.FileExists(t, path, "a release waits for the sidecar")
	require.NoError(t, sidecar.Close())
	removed, err = RemoveMarker("", path, os.Getpid(), start)
	require.NoError(t, err)
	assert.True(t, removed)
}
