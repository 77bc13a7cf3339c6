package runtimeguard

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// held is what the process holds that a guard may: descriptors, among
// them pidfds, inotify watches (on every inotify descriptor, from
// /proc/self/fdinfo), and goroutines.
type held struct {
	fds, pidfds, watches, goroutines int
}

// holding counts what the process holds now.
func holding(t *testing.T) held {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	h := held{goroutines: runtime.NumGoroutine()}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue // the descriptor of the listing, closed since
		}
		h.fds++
		switch link {
		case "anon_inode:[pidfd]":
			h.pidfds++
		case "anon_inode:inotify":
			info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", e.Name()))
			require.NoError(t, err)
			h.watches += bytes.Count(info, []byte("\ninotify wd:"))
		}
	}
	return h
}

// settled waits, for up to 10 s, until the process holds no more than
// base, and returns what it holds then.
func settled(t *testing.T, base held) held {
	t.Helper()
	var h held
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h = holding(t)
		if h.fds <= base.fds && h.pidfds <= base.pidfds && h.watches <= base.watches && h.goroutines <= base.goroutines || time.Now().After(deadline) {
			return h
		}
	}
}

// Closed guards leave nothing behind: guards on the watch path, each
// running Watch, each stale with an update under way (its marker naming a
// live process, which a stale answer keeps a pidfd of), each asked for a
// diagnostic, once closed hold no descriptor, pidfd, inotify watch or
// goroutine.
func TestClosedGuardsHoldNothing(t *testing.T) {
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		t.Skipf("no pidfds here: %v", err)
	} else {
		unix.Close(fd)
	}
	live := sleeper(t)
	round := func(n int) (open held) {
		guards := make([]*Guard, n)
		watching := make([]chan error, n)
		for i := range guards {
			tmp := tempDir(t)
			dir, home := filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
			module, _ := agentRepo(t, dir)
			writeMarker(t, filepath.Join(home, hermesMarker), live.Process.Pid, time.Now())
			g, err := New(Options{ModulePath: module, HomeDir: home})
			require.NoError(t, err)
			for j := 0; j < 3 && !onWatchPath(g); j++ {
				require.NoError(t, g.EnsureCurrent())
			}
			require.True(t, onWatchPath(g), "the guard took the watch path")
			watching[i] = make(chan error, 1)
			go func() { watching[i] <- g.Watch(context.Background(), time.Second) }()
			commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n")
			var se *StaleError
			require.ErrorAs(t, g.EnsureCurrent(), &se)
			require.Equal(t, UpdateActive, se.State)
			assert.Equal(t, UpdateActive, g.Observe().State)
			guards[i] = g
		}
		open = holding(t)
		for i, g := range guards {
			require.NoError(t, g.Close())
			require.NoError(t, <-watching[i], "Watch of a closed guard")
		}
		return open
	}
	round(1)     // what the process keeps for good: the inotify descriptor, its epoll sets
	runtime.GC() // earlier tests' guards, dropped: the collector closes what they hold
	base := settled(t, holding(t))
	const guards = 20
	open := round(guards)
	require.GreaterOrEqual(t, open.pidfds, guards, "each stale answer keeps a pidfd of the marker's process")
	require.Greater(t, open.watches, base.watches, "the guards' inotify watches")
	// Fewer than before is what other tests' guards, dropped and
	// collected meanwhile, released.
	after := settled(t, base)
	assert.LessOrEqual(t, after.pidfds, base.pidfds, "pidfds")
	assert.LessOrEqual(t, after.watches, base.watches, "inotify watches")
	assert.LessOrEqual(t, after.fds, base.fds, "descriptors")
	if !assert.LessOrEqual(t, after.goroutines, base.goroutines, "goroutines") {
		t.Logf("goroutines:\n%s", allStacks())
	}
}

// allStacks is the stacks of the process's goroutines.
func allStacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}
