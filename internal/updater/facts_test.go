package updater

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The facts of a marker, judged, are what ReadMarker says of the same
// files, for every kind of marker and artifact: one classification.
func TestJudgedFactsAreReadMarker(t *testing.T) {
	live, dead := os.Getpid(), exitedPID(t)
	release := func(pid int) string { return fmt.Sprintf("%s%d-x", ReleaseInfix, pid) }
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
				writeFile(t, path, tc.marker)
			}
			for _, b := range tc.beside {
				writeFile(t, path+b, "")
			}
			want := System.ReadMarker(path, maxAge)
			f := System.ReadMarkerFacts(path)
			assert.Equal(t, want, System.JudgeMarker(&f, maxAge))
		})
	}
	f := System.ReadMarkerFacts("")
	assert.Equal(t, System.ReadMarker("", maxAge), System.JudgeMarker(&f, maxAge))
}

// Facts kept while no file changed are judged again on each use: the
// marker's process exits, and the same facts are stale; the clock passes
// the age limit, and they are stale; a release's process exits, and it
// counts for nothing.
func TestFactsAreJudgedNow(t *testing.T) {
	path := filepath.Join(tempDir(t), markerName)
	child := longChild(t)
	start := time.Now()
	writeMarker(t, path, child.Process.Pid, start)
	e := testEnv(nil)
	e.Cache = new(Cache)
	var now time.Time
	e.Now = func() time.Time {
		if now.IsZero() {
			return time.Now()
		}
		return now
	}
	f := e.ReadMarkerFacts(path)
	require.Equal(t, Active, e.JudgeMarker(&f, maxAge).State)
	now = start.Add(maxAge + time.Second)
	assert.Equal(t, Stale, e.JudgeMarker(&f, maxAge).State, "past the age limit")
	now = time.Time{}
	require.Equal(t, Active, e.JudgeMarker(&f, maxAge).State)
	require.NoError(t, child.Process.Kill())
	_, _ = child.Process.Wait()
	assert.Equal(t, Stale, e.JudgeMarker(&f, maxAge).State, "the marker's process exited")

	require.NoError(t, os.Remove(path))
	releaser := longChild(t)
	writeFile(t, fmt.Sprintf("%s%s%d-x", path, ReleaseInfix, releaser.Process.Pid), "")
	f = e.ReadMarkerFacts(path)
	require.Equal(t, Active, e.JudgeMarker(&f, maxAge).State)
	require.NoError(t, releaser.Process.Kill())
	_, _ = releaser.Process.Wait()
	assert.Equal(t, Absent, e.JudgeMarker(&f, maxAge).State, "the releaser exited")
}
