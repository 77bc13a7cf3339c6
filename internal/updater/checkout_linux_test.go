package updater

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/fusehang"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// opened watches path (what a link there leads to, or the file itself)
// for opens: the function reports whether anything opened it since.
// inotify queues IN_OPEN as the open happens, so no wait is needed.
func opened(t *testing.T, path string) func() bool {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	_, err = unix.InotifyAddWatch(fd, path, unix.IN_OPEN)
	require.NoError(t, err)
	return func() bool {
		buf := make([]byte, 4096)
		n, err := unix.Read(fd, buf)
		return err == nil && n > 0
	}
}

// A probe of the checkout lock opens nothing but a regular file: a FIFO
// or a directory at the lock's name, or where a link there leads (the
// updater's own path is probed through links, as it opens it), is never
// opened (a FIFO's open would release a writer waiting on it; a device's
// could do anything), and the reason says so; a regular file is opened,
// as the probe must.
func TestProbeCheckoutLockOpensNoSpecialFile(t *testing.T) {
	for _, kind := range []string{"FIFO", "directory"} {
		for _, follow := range []bool{false, true} {
			t.Run(fmt.Sprintf("a %s, through a link %v", kind, follow), func(t *testing.T) {
				dir := tempDir(t)
				special := filepath.Join(dir, "special")
				if kind == "FIFO" {
					gittest.Mkfifo(t, special)
				} else {
					require.NoError(t, os.Mkdir(special, 0o755))
				}
				path := special
				if follow {
					path = filepath.Join(dir, "hermes-update.lock")
					require.NoError(t, os.Symlink(special, path))
				}
				wasOpened := opened(t, special)
				state, why := ProbeCheckoutLock(path, follow)
				assert.Equal(t, LockUnknown, state, why)
				assert.False(t, wasOpened(), "the probe opened the %s: %s", kind, why)
				assert.Contains(t, why, "not opened")
				assert.Contains(t, why, map[string]string{"FIFO": "named pipe", "directory": "directory"}[kind])
			})
		}
	}
	t.Run("a regular file", func(t *testing.T) {
		path := filepath.Join(tempDir(t), "hermes-update.lock")
		writeFile(t, path, "")
		wasOpened := opened(t, path)
		state, why := ProbeCheckoutLock(path, false)
		assert.Equal(t, LockFree, state, why)
		assert.True(t, wasOpened(), "the probe tried the lock without opening its file")
	})
}

// A checkout lock on a file system that stops answering holds up no probe
// of another lock: a probe blocked in the open of the hung lock file holds
// nothing the other probes wait for (probes are serialized per lock path,
// and never across the open). Every guard of the process probes through
// here, so one guard's hung lock file must not stall another's.
func TestProbeOfAHungLockHoldsUpNoOther(t *testing.T) {
	mnt := filepath.Join(tempDir(t), "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	f := fusehang.Mount(t, mnt, map[string]string{"git": tempDir(t)})
	hung := filepath.Join(f.Dir, "git", HermesCheckoutLock)
	f.Hang()
	go ProbeCheckoutLock(hung, false) // returns once the mount is torn down
	require.Eventually(t, func() bool { return f.Pending() > 0 }, 10*time.Second, time.Millisecond, "the probe never reached the hung file system")

	other := filepath.Join(tempDir(t), HermesCheckoutLock)
	writeFile(t, other, "")
	probed := make(chan LockState, 1)
	go func() {
		state, _ := ProbeCheckoutLock(other, false)
		probed <- state
	}()
	select {
	case state := <-probed:
		assert.Equal(t, LockFree, state)
	case <-time.After(10 * time.Second):
		t.Fatal("the probe of a lock that answers waited for the probe of a hung one")
	}
}
