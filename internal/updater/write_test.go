package updater

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probeAlive is a process probe under which the processes pids and this
// one live and every other is gone.
func probeAlive(pids ...int64) func(int64) ProcInfo {
	return func(pid int64) ProcInfo {
		if pid == int64(os.Getpid()) || slices.Contains(pids, pid) {
			return ProcInfo{State: ProcessAlive}
		}
		return ProcInfo{State: ProcessGone}
	}
}

// A marker is claimed only where none is or a stale one was, reads back as
// what it says, and is removed only by the updater that wrote it.
func TestClaimAndRemoveMarker(t *testing.T) {
	path := filepath.Join(tempDir(t), "home", "marker")
	start := time.Now()
	e := testEnv(probeAlive(1234))
	require.NoError(t, e.ClaimMarker(path, 1234, start, maxAge))
	pid, started, ok := ParseMarker(mustRead(t, path))
	require.True(t, ok)
	assert.Equal(t, int64(1234), pid)
	assert.InDelta(t, float64(start.UnixNano())/1e9, started, 1e-6)

	assert.ErrorIs(t, e.ClaimMarker(path, 5678, start, maxAge), ErrMarkerHeld, "an active marker")
	removed, err := RemoveMarker(path, 5678, start)
	require.NoError(t, err)
	assert.False(t, removed, "another updater's marker")
	removed, err = RemoveMarker(path, 1234, start.Add(time.Second))
	require.NoError(t, err)
	assert.False(t, removed, "a marker of the same process ID, written at another time")
	assert.FileExists(t, path)
	assertNoArtifacts(t, path)

	// 1234 is gone: its marker is stale, and replaced.
	e = testEnv(probeAlive(5678))
	require.NoError(t, e.ClaimMarker(path, 5678, start, maxAge), "a stale marker is replaced")
	assertNoArtifacts(t, path)
	removed, err = RemoveMarker(path, 1234, start)
	require.NoError(t, err)
	assert.False(t, removed, "the first updater leaves the marker of the one that replaced it")
	removed, err = RemoveMarker(path, 5678, start)
	require.NoError(t, err)
	assert.True(t, removed)
	assert.NoFileExists(t, path)
	assertNoArtifacts(t, path)

	removed, err = RemoveMarker(path, 5678, start)
	assert.NoError(t, err, "nothing there")
	assert.False(t, removed)
	require.NoError(t, os.Mkdir(path, 0o755))
	removed, err = RemoveMarker(path, 5678, start)
	assert.NoError(t, err)
	assert.False(t, removed, "a directory is no marker of ours")
	assert.DirExists(t, path)
	assert.ErrorIs(t, e.ClaimMarker(path, 5678, start, maxAge), ErrMarkerHeld, "a directory at the marker's path proves nothing")
}

// Of updaters started at once on a stale marker, exactly one claims it:
// replacing a stale marker is as exclusive as creating one.
func TestClaimStaleMarkerIsExclusive(t *testing.T) {
	const racers, rounds = 6, 150
	dir := tempDir(t)
	for round := 0; round < rounds; round++ {
		path := filepath.Join(dir, fmt.Sprintf("marker-%d", round))
		writeMarker(t, path, 99, time.Now().Add(-time.Minute)) // process 99 is gone
		pids := make([]int64, racers)
		for i := range pids {
			pids[i] = int64(1000 + i)
		}
		e := testEnv(probeAlive(pids...))
		var wg sync.WaitGroup
		errs := make([]error, racers)
		start := make(chan struct{})
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = e.ClaimMarker(path, 1000+i, time.Now(), maxAge)
			}()
		}
		close(start)
		wg.Wait()
		winners := 0
		winner := -1
		for i, err := range errs {
			if err == nil {
				winners++
				winner = i
			} else {
				require.ErrorIs(t, err, ErrMarkerHeld, "racer %d", i)
			}
		}
		require.Equal(t, 1, winners, "round %d: claims %v", round, errs)
		pid, _, ok := ParseMarker(mustRead(t, path))
		require.True(t, ok)
		assert.Equal(t, int64(1000+winner), pid, "the marker is the winner's")
		assertNoArtifacts(t, path)
	}
}

// assertNoArtifacts checks that nothing was left beside the marker.
func assertNoArtifacts(t *testing.T, path string) {
	t.Helper()
	left, err := filepath.Glob(path + ".cas-*")
	require.NoError(t, err)
	assert.Empty(t, left, "artifacts left beside %s", path)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}
