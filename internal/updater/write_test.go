package updater

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// A marker is claimed only where none is or a stale one was, reads back as
// what it says, and is removed only by the updater that wrote it.
func TestClaimAndRemoveMarker(t *testing.T) {
	path := filepath.Join(tempDir(t), "home", "marker")
	start := time.Now()
	e := probedEnv(probeAlive(1234))
	require.NoError(t, ClaimMarker("", path, 1234, start, judgeOf(e)))
	pid, started, ok := ParseMarker(mustRead(t, path))
	require.True(t, ok)
	assert.Equal(t, int64(1234), pid)
	assert.Equal(t, float64(start.Unix()), started, "the updater's own reader takes whole seconds only")

	assert.ErrorIs(t, ClaimMarker("", path, 5678, start, judgeOf(e)), ErrMarkerHeld, "an active marker")
	removed, err := RemoveMarker("", path, 5678, start)
	require.NoError(t, err)
	assert.False(t, removed, "another updater's marker")
	removed, err = RemoveMarker("", path, 1234, start.Add(time.Second))
	require.NoError(t, err)
	assert.False(t, removed, "a marker of the same process ID, written at another time")
	assert.FileExists(t, path)
	assertNoArtifacts(t, path)

	// 1234 is gone: its marker is stale, and replaced.
	e = probedEnv(probeAlive(5678))
	require.NoError(t, ClaimMarker("", path, 5678, start, judgeOf(e)), "a stale marker is replaced")
	assertNoArtifacts(t, path)
	removed, err = RemoveMarker("", path, 1234, start)
	require.NoError(t, err)
	assert.False(t, removed, "the first updater leaves the marker of the one that replaced it")
	removed, err = RemoveMarker("", path, 5678, start)
	require.NoError(t, err)
	assert.True(t, removed)
	assert.NoFileExists(t, path)
	assertNoArtifacts(t, path)

	removed, err = RemoveMarker("", path, 5678, start)
	assert.NoError(t, err, "nothing there")
	assert.False(t, removed)
	require.NoError(t, os.Mkdir(path, 0o755))
	removed, err = RemoveMarker("", path, 5678, start)
	assert.NoError(t, err)
	assert.False(t, removed, "a directory is no marker of ours")
	assert.DirExists(t, path)
	assert.ErrorIs(t, ClaimMarker("", path, 5678, start, judgeOf(e)), ErrMarkerHeld, "a directory at the marker's path proves nothing")
}

// Of updaters started at once on a stale marker, exactly one claims it:
// replacing a stale marker is as exclusive as creating one.
func TestClaimStaleMarkerIsExclusive(t *testing.T) {
	const racers, rounds = 6, 150
	dir := tempDir(t)
	for round := 0; round < rounds; round++ {
		path := filepath.Join(dir, fmt.Sprintf("marker-%d", round))
		gittest.WriteMarker(t, path, 99, time.Now().Add(-time.Minute)) // process 99 is gone
		pids := make([]int64, racers)
		for i := range pids {
			pids[i] = int64(1000 + i)
		}
		e := probedEnv(probeAlive(pids...))
		var wg sync.WaitGroup
		errs := make([]error, racers)
		start := make(chan struct{})
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = ClaimMarker("", path, 1000+i, time.Now(), judgeOf(e))
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

// What WriteReceipt writes, ParseReceipt reads back, its writer (this
// process, with its creation time) and checkout too; a finished run also
// leaves its own file.
func TestWriteReceiptRoundTrip(t *testing.T) {
	dir := tempDir(t)
	latest := filepath.Join(dir, "logs", "update_receipts", "latest.json")
	start := time.Date(2026, 11, 30, 5, 0, 0, 123, time.UTC)
	running := Receipt{UpdateID: NewUpdateID(), Outcome: OutcomeRunning, StartedAt: start, From: shaA, Checkout: "/srv/agent", Writer: OwnIdentity()}
	pid := os.Getpid()
	require.NoError(t, WriteReceipt("", latest, running, pid))
	entries, err := os.ReadDir(filepath.Dir(latest))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "a running receipt is only the latest")

	done := running
	done.Outcome, done.FinishedAt, done.To = OutcomeSuccess, start.Add(time.Minute), shaB
	require.NoError(t, WriteReceipt("", latest, done, pid))
	for _, p := range []string{latest, filepath.Join(filepath.Dir(latest), "update_20261130T050000Z_"+strconv.Itoa(pid)+"_"+done.UpdateID+".json")} {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		got, err := ParseReceipt(data)
		require.NoError(t, err, "%s", data)
		done.ID = "update_id:" + done.UpdateID
		assert.Equal(t, done, got, p)
	}
}

// The file WriteReceipt writes is schema 1, key for key: the schema, the
// run's names where it has them, the outcome and times, the revisions on
// each side under pre_update and post_update, the checkout where it has
// one, and its writer (here a process ID no process has, on any platform:
// past Linux's limit, and odd for Windows; so no creation time). The
// reader's ID is never written.
func TestWriteReceiptBytes(t *testing.T) {
	const noProcess = 4194305
	start := time.Date(2026, 11, 30, 5, 0, 0, 123, time.UTC)
	dir := tempDir(t)
	for _, tc := range []struct {
		r    Receipt
		want string
	}{
		{Receipt{ID: "update_id:0123456789abcdef", UpdateID: "0123456789abcdef", CorrelationID: "c1", Outcome: OutcomeSuccess,
			StartedAt: start, FinishedAt: start.Add(time.Minute), From: strings.Repeat("a", 40), To: strings.Repeat("b", 40), Checkout: "/srv/agent"}, `{
  "schema": 1,
  "update_id": "0123456789abcdef",
  "correlation_id": "c1",
  "outcome": "success",
  "started_at": "2026-11-30T05:00:00.000000123Z",
  "finished_at": "2026-11-30T05:01:00.000000123Z",
  "pre_update": {
    "sha": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
  },
  "post_update": {
    "sha": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
  },
  "runtimeguard_checkout": "/srv/agent",
  "pid": 4194305
}
`},
		{Receipt{Outcome: OutcomeRunning, StartedAt: start}, `{
  "schema": 1,
  "outcome": "running",
  "started_at": "2026-11-30T05:00:00.000000123Z",
  "pre_update": {},
  "post_update": {},
  "pid": 4194305
}
`},
	} {
		latest := filepath.Join(dir, tc.r.Outcome, "latest.json")
		require.NoError(t, WriteReceipt("", latest, tc.r, noProcess))
		assert.Equal(t, tc.want, string(mustRead(t, latest)), "WriteReceipt(%+v)", tc.r)
	}
}

// A claim obeys the guard's classification, whatever the marker: it
// replaces what a guard reads as stale or absent and refuses everything
// else, and the claimed marker reads as active. The judge the command-line
// tool claims by is the guard's own.
func TestClaimObeysTheGuardsReading(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name  string
		setup func(t *testing.T, path string)
	}{
		{"none", func(*testing.T, string) {}},
		{"a live process", func(t *testing.T, path string) { gittest.WriteMarker(t, path, os.Getpid(), now) }},
		{"over age", func(t *testing.T, path string) { gittest.WriteMarker(t, path, os.Getpid(), now.Add(-time.Hour)) }},
		{"a gone process", func(t *testing.T, path string) { gittest.WriteMarker(t, path, gittest.ExitedPID(t, processGone), now) }},
		{"garbage", func(t *testing.T, path string) { writeFile(t, path, "garbage") }},
		{"a time in the future", func(t *testing.T, path string) { gittest.WriteMarker(t, path, os.Getpid(), now.Add(time.Hour)) }},
		{"a directory", func(t *testing.T, path string) { require.NoError(t, os.Mkdir(path, 0o755)) }},
		{"a release in flight", func(t *testing.T, path string) {
			gittest.WriteMarker(t, fmt.Sprintf("%s%s%d-x", path, ReleaseInfix, os.Getpid()), os.Getpid(), now)
		}},
		{"a stale marker and a release in flight", func(t *testing.T, path string) {
			gittest.WriteMarker(t, path, os.Getpid(), now.Add(-time.Hour))
			gittest.WriteMarker(t, fmt.Sprintf("%s%s%d-x", path, ReleaseInfix, os.Getpid()), os.Getpid(), now)
		}},
		{"a finished release", func(t *testing.T, path string) {
			gittest.WriteMarker(t, fmt.Sprintf("%s%s%d-x", path, ReleaseInfix, gittest.ExitedPID(t, processGone)), os.Getpid(), now)
		}},
		{"an unresolved cleanup", func(t *testing.T, path string) { writeFile(t, path+".cas-claim-1", "") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), markerName)
			tc.setup(t, path)
			before := readMarker(path)
			err := ClaimMarker("", path, os.Getpid(), now, System.Judge(defaultMaxAge))
			if before == NoUpdate || before == Ended {
				require.NoError(t, err, "ClaimMarker of a marker the guard reads as %s", before)
				assert.Equal(t, Live, readMarker(path), "the claimed marker")
				removed, err := RemoveMarker("", path, os.Getpid(), now)
				require.NoError(t, err)
				assert.True(t, removed)
				return
			}
			require.ErrorIs(t, err, ErrMarkerHeld, "ClaimMarker of a marker the guard reads as %s", before)
			assert.Contains(t, err.Error(), before.String(), "the refusal says what the guard reads")
			assert.Equal(t, before, readMarker(path), "a refused claim changes nothing")
		})
	}
}
