package systemd

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/fusehang"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

func monotonicNow(t *testing.T) uint64 {
	var ts unix.Timespec
	require.NoError(t, unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts))
	return uint64(ts.Sec)*1e6 + uint64(ts.Nsec)/1e3
}

// RELOADING=1 carries the time the reload began on CLOCK_MONOTONIC, the
// clock the service manager compares it with.
func TestNotifyReloadingTime(t *testing.T) {
	name := t.TempDir() + "/notify"
	read := listenNotify(t, name)
	t.Setenv("NOTIFY_SOCKET", name)
	n, err := FromEnv()
	require.NoError(t, err)
	before := monotonicNow(t)
	require.NoError(t, n.Reloading("reloading to def456"))
	after := monotonicNow(t)
	lines := strings.Split(strings.TrimSuffix(read(), "\n"), "\n")
	require.Len(t, lines, 3, "%q", lines)
	assert.Equal(t, "RELOADING=1", lines[0])
	usec, ok := strings.CutPrefix(lines[1], "MONOTONIC_USEC=")
	require.True(t, ok, lines[1])
	v, err := strconv.ParseUint(usec, 10, 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, v, before)
	assert.LessOrEqual(t, v, after)
	assert.Equal(t, "STATUS=reloading to def456", lines[2])
}

// A name that begins with "@" is a socket in the abstract namespace.
func TestNotifyAbstractSocket(t *testing.T) {
	name := fmt.Sprintf("@runtimeguard-notify-test-%d-%s", os.Getpid(), t.Name())
	read := listenNotify(t, name)
	t.Setenv("NOTIFY_SOCKET", name)
	n, err := FromEnv()
	require.NoError(t, err)
	require.NoError(t, n.Ready(""))
	assert.Equal(t, "READY=1\n", read())
}

// A manager whose queue is full takes no message: every send gives up
// within Timeout, with an error that says so, rather than wait for good.
func TestNotifyFullQueue(t *testing.T) {
	// Run once the last send gave up: the process's one sender is free
	// again before the next test sends.
	t.Cleanup(func() { waitForTheSender(t) })
	name := t.TempDir() + "/notify"
	gittest.FullDatagramSocket(t, name)
	t.Setenv("NOTIFY_SOCKET", name)
	n, err := FromEnv()
	require.NoError(t, err)
	for _, send := range []func() error{
		func() error { return n.Ready("serving abc123") },
		func() error { return n.Reloading("reloading") },
		func() error { return n.SetStatus("stale") },
		func() error { return n.Send("STOPPING=1") },
	} {
		done := make(chan error, 1)
		go func() { done <- send() }()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
			assert.ErrorContains(t, err, "queue is full")
		case <-time.After(10 * Timeout):
			t.Fatalf("a send to a full queue still waits after %v", 10*Timeout)
		}
	}
}

// A socket whose path is on a file system that stopped answering (the
// connection's lookup of the path never returns): every send gives up
// within Timeout, with an error that says so, and however many sends
// there are, at once or one after another, one system call is blocked
// on the path: the process's one sender's.
func TestNotifyOnAHungPath(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	// Run after the mount is gone: the process's one sender is free again
	// before the next test sends.
	t.Cleanup(func() { waitForTheSender(t) })
	f := fusehang.Mount(t, mnt, map[string]string{"run": t.TempDir()})
	t.Setenv("NOTIFY_SOCKET", filepath.Join(mnt, "run", "notify"))
	n, err := FromEnv()
	require.NoError(t, err)
	f.Hang()
	goroutines := runtime.NumGoroutine()
	for _, at := range []int{1, 16} { // sends at once
		errs := make(chan error, at)
		for range at {
			go func() { errs <- n.Ready("serving abc123") }()
		}
		for range at {
			select {
			case err := <-errs:
				assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
				assert.ErrorContains(t, err, "its path does not answer")
			case <-time.After(2 * Timeout): // a bound on a hang: the deadline is Timeout
				t.Fatalf("a send to a hung path still waits after %v", 2*Timeout)
			}
		}
		assert.Equal(t, 1, f.Pending(), "system calls blocked on the hung path after %d sends at once", at)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines+2, "goroutines left by the sends (the sender's is one)")
}

// waitForTheSender waits, up to 30 s, until the process's one sender
// delivers a message again: until a send to a socket that reads gets
// through.
func waitForTheSender(t *testing.T) {
	name := filepath.Join(t.TempDir(), "notify")
	read := listenNotify(t, name)
	n := &Notifier{addr: &net.UnixAddr{Name: name, Net: "unixgram"}}
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := n.Send("X=1")
		if err == nil {
			assert.Equal(t, "X=1\n", read())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sender still refuses messages: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}
