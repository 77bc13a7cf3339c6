//go:build unix

package updater

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

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
	gittest.WriteMarker(t, path, child.Process.Pid, start)
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

// readWithin classifies path in a goroutine and fails the test if that does
// not return: a blocked read would otherwise hang the whole run.
func readWithin(t *testing.T, path string) Life {
	t.Helper()
	done := make(chan Life, 1)
	go func() { done <- readMarker(path) }()
	select {
	case s := <-done:
		return s
	case <-time.After(30 * time.Second):
		t.Fatalf("readMarker(%q) blocked", path)
		return NoUpdate
	}
}

func TestFIFOMarkerIsUnknownWithoutBlocking(t *testing.T) {
	fifo := filepath.Join(tempDir(t), markerName)
	gittest.Mkfifo(t, fifo)
	assert.Equal(t, Unsure, readWithin(t, fifo), "no writer")

	// A writer holds it open, with data waiting.
	w, err := unix.Open(fifo, unix.O_RDWR|unix.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer unix.Close(w)
	_, err = unix.Write(w, []byte("1\n1\n"))
	require.NoError(t, err)
	assert.Equal(t, Unsure, readWithin(t, fifo), "a writer holds it open")
}

func TestSymlinkMarkerIsNotFollowed(t *testing.T) {
	dir := tempDir(t)
	target := filepath.Join(dir, "real-marker")
	gittest.WriteMarker(t, target, os.Getpid(), time.Now())
	require.Equal(t, Live, readMarker(target))
	link := filepath.Join(dir, markerName)
	require.NoError(t, os.Symlink(target, link))
	assert.Equal(t, Unsure, readMarker(link))
	dangling := filepath.Join(dir, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(dir, "missing"), dangling))
	assert.Equal(t, Unsure, readMarker(dangling))
}

func TestDeviceAndSocketMarkersAreUnknown(t *testing.T) {
	assert.Equal(t, Unsure, readMarker(os.DevNull))
	sock := filepath.Join(tempDir(t), "s")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrUnix{Name: sock}))
	assert.Equal(t, Unsure, readMarker(sock))
}

// A marker naming a live child is stale when the child started more than
// pidReuseSlack after the marker's time (the child holds a reused process
// ID), and active when it started before, or after by less than the slack.
func TestReusedPIDMarker(t *testing.T) {
	if start, _ := processStart(int64(os.Getpid())); start.IsZero() {
		t.Skip("this platform does not tell when a process started")
	}
	before := time.Now()
	cmd := exec.Command("sleep", "30")
	require.NoError(t, cmd.Start())
	after := time.Now()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The child started between before and after.
	cases := []struct {
		name    string
		written time.Time
		want    Life
	}{
		{"written 2.3 s before the child started", before.Add(-2300 * time.Millisecond), Ended},
		{"written 1.5 s before the child started", before.Add(-1500 * time.Millisecond), Ended},
		{"written 0.5 s before Start returned: within the slack", after.Add(-500 * time.Millisecond), Live},
		{"written after the child started", after, Live},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), markerName)
			gittest.WriteMarker(t, path, cmd.Process.Pid, tc.written)
			got := readMarker(path)
			assert.Equal(t, tc.want, got, "readMarker(%q) = %q, want %q (marker time %v before Start was called, which took %v)",
				path, got, tc.want, before.Sub(tc.written), after.Sub(before))
		})
	}
}
