//go:build unix

package updater

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

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
	mkfifo(t, fifo)
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
	writeMarker(t, target, os.Getpid(), time.Now())
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

func TestProbeProcess(t *testing.T) {
	self := ProbeProcess(int64(os.Getpid()))
	assert.Equal(t, ProcessAlive, self.State)
	cmd := exec.Command("git", "--version")
	require.NoError(t, cmd.Run())
	assert.Equal(t, ProcessGone, ProbeProcess(int64(cmd.Process.Pid)).State)
	// Values kill(2) would truncate are never asked about.
	assert.Equal(t, LivenessUnknown, ProbeProcess(1<<32+int64(os.Getpid())).State)
	assert.Equal(t, LivenessUnknown, ProbeProcess(-1).State)
}

// A marker naming a live child is stale when the child started more than
// pidReuseSlack after the marker's time (the child holds a reused process
// ID), and active when it started before, or after by less than the slack.
func TestReusedPIDMarker(t *testing.T) {
	if start, _ := ProcessStart(int64(os.Getpid())); start.IsZero() {
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
			writeMarker(t, path, cmd.Process.Pid, tc.written)
			got := readMarker(path)
			assert.Equal(t, tc.want, got, "readMarker(%q) = %q, want %q (marker time %v before Start was called, which took %v)",
				path, got, tc.want, before.Sub(tc.written), after.Sub(before))
		})
	}
}
