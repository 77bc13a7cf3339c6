//go:build unix

package updater

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// The facts of a marker, judged, are what a read of the same files says,
// for every kind of marker and artifact: one classification, of a fresh
// read as of facts kept.
func TestJudgedFactsAreRead(t *testing.T) {
	live, dead := os.Getpid(), gittest.ExitedPID(t, processGone)
	release := func(pid int) string { return fmt.Sprintf("%s%d-x", ReleaseInfix, pid) }
	e := System
	for _, tc := range []struct {
		name   string
		marker string // "" for none
		dir    bool   // the marker is a directory
		beside []string
	}{
		{name: "absent"},
		{name: "live", marker: fmt.Sprintf("%d\n%d\n", live, time.Now().Unix())},
		{name: "dead", marker: fmt.Sprintf("%d\n%d\n", dead, time.Now().Unix())},
		{name: "old", marker: fmt.Sprintf("%d\n%d\n", live, time.Now().Add(-time.Hour).Unix())},
		{name: "future", marker: fmt.Sprintf("%d\n%d\n", live, time.Now().Add(time.Hour).Unix())},
		{name: "garbage", marker: "garbage"},
		{name: "directory", dir: true},
		{name: "live-release", beside: []string{release(live)}},
		{name: "dead-release", beside: []string{release(dead)}},
		{name: "dead-marker-live-release", marker: fmt.Sprintf("%d\n%d\n", dead, time.Now().Unix()), beside: []string{release(live)}},
		{name: "claim", beside: []string{".cas-claim-1"}},
		{name: "garbage-and-claim", marker: "garbage", beside: []string{".cas-claim-1"}},
		{name: "no-process", beside: []string{ReleaseInfix + "abc-x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), markerName)
			switch {
			case tc.dir:
				require.NoError(t, os.Mkdir(path, 0o755))
			case tc.marker != "":
				require.NoError(t, os.WriteFile(path, []byte(tc.marker), 0o644))
			}
			for _, b := range tc.beside {
				require.NoError(t, os.WriteFile(path+b, nil, 0o644))
			}
			want := e.ClassifyMarker(path, defaultMaxAge)
			f := e.ReadMarker(path)
			assert.Equal(t, want, e.JudgeMarker(&f, defaultMaxAge))
		})
	}
	f := e.ReadMarker("")
	assert.Equal(t, e.ClassifyMarker("", defaultMaxAge), e.JudgeMarker(&f, defaultMaxAge))
}

// Facts kept while no file changed are judged again on each use: the
// marker's process exits, and the same facts are stale; the clock passes
// the age limit, and they are stale; a release's process exits, and it
// counts for nothing.
func TestFactsAreJudgedNow(t *testing.T) {
	path := filepath.Join(tempDir(t), markerName)
	child := gittest.LongChild(t)
	start := time.Now()
	writeMarker(t, path, child.Process.Pid, start)
	e := testEnv()
	e.Cache = new(Cache) // as a guard's
	var now time.Time
	e.Now = func() time.Time {
		if now.IsZero() {
			return time.Now()
		}
		return now
	}
	maxAge := defaultMaxAge
	f := e.ReadMarker(path)
	require.Equal(t, Live, e.JudgeMarker(&f, maxAge).Life)
	now = start.Add(maxAge + time.Second)
	assert.Equal(t, Ended, e.JudgeMarker(&f, maxAge).Life, "past the age limit")
	now = time.Time{}
	require.Equal(t, Live, e.JudgeMarker(&f, maxAge).Life)
	require.NoError(t, child.Process.Kill())
	_, _ = child.Process.Wait()
	assert.Equal(t, Ended, e.JudgeMarker(&f, maxAge).Life, "the marker's process exited")

	require.NoError(t, os.Remove(path))
	releaser := gittest.LongChild(t)
	require.NoError(t, os.WriteFile(fmt.Sprintf("%s%s%d-x", path, ReleaseInfix, releaser.Process.Pid), nil, 0o644))
	f = e.ReadMarker(path)
	require.Equal(t, Live, e.JudgeMarker(&f, maxAge).Life)
	require.NoError(t, releaser.Process.Kill())
	_, _ = releaser.Process.Wait()
	assert.Equal(t, NoUpdate, e.JudgeMarker(&f, maxAge).Life, "the releaser exited")
}
