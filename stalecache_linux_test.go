package runtimeguard

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// staleCase is a guard on the watch path whose checkout moved, so that
// every check is a stale answer, with the updater's clock under the
// test's hand (the real clock plus ahead).
type staleCase struct {
	g         *Guard
	dir, home string
	marker    string
	ahead     atomic.Int64 // nanoseconds the updater's clock runs ahead
	probes    atomic.Int64 // process probes that ask the system (kill and /proc)
	opens     atomic.Int64 // safe opens of the updater's files
}

func newStaleCase(t *testing.T) *staleCase {
	t.Helper()
	c := &staleCase{}
	tmp := tempDir(t)
	c.dir, c.home = filepath.Join(tmp, "agent"), filepath.Join(tmp, "home")
	require.NoError(t, os.MkdirAll(c.home, 0o755))
	c.marker = filepath.Join(c.home, hermesMarker)
	module, _ := agentRepo(t, c.dir)
	e := watchEnv(t)
	now := func() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }
	open := func(path string, limit int64) ([]byte, updater.FileKind, string) {
		c.opens.Add(1)
		return updater.SafeOpen(path, limit)
	}
	u := *e.upd
	u.Now, u.Open = now, open
	e.upd = &u
	m := *e.marker
	m.now, m.open = now, open
	m.probe = func(pid int64) procInfo {
		c.probes.Add(1)
		return probeProcess(pid)
	}
	e.marker = &m
	g, err := newGuard(Options{ModulePath: module, HomeDir: c.home}, e)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	c.g = g
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g), "the guard took the watch path")
	commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	return c
}

// state makes a stale check and returns the update state it answered,
// after checking that the cache (which this check may have filled) says
// now what a fresh read of the same files says. A change of the mount
// table (an earlier test's FUSE file system unmounted) makes every
// subscription dirty at the first poll of each epoll set after it: the
// check is made again then, a few times at most.
func (c *staleCase) state(t *testing.T) UpdateState {
	t.Helper()
	w, err := watch.Shared()
	require.NoError(t, err)
	for attempt := 0; ; attempt++ {
		mounts := w.MountChanges()
		err := c.g.EnsureCurrent()
		var se *StaleError
		require.ErrorAs(t, err, &se)
		b := c.g.bound.Load()
		cfg := c.g.config()
		cached, ok := b.cachedStale(cfg)
		if !ok && attempt < 8 && w.MountChanges() != mounts {
			continue
		}
		require.True(t, ok, "the stale answer's facts are cached")
		assert.Equal(t, cfg.observeAt(noReceipt, b.installDirs()...), cached, "the cached observation against a fresh read")
		return se.State
	}
}

// sleeper starts a process that lives until the test ends or it is
// killed.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// A marker rewritten in place between two stale answers, and one
// renamed over, are read again: the cache does not keep what the file
// said.
func TestStaleCacheMarkerRewritten(t *testing.T) {
	c := newStaleCase(t)
	live := sleeper(t)
	writeMarker(t, c.marker, live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	assert.Equal(t, UpdateActive, c.state(t))

	// In place: the same file, truncated and written.
	f, err := os.OpenFile(c.marker, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "%d\n%d\n", exitedPID(t), time.Now().Unix())
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, UpdateStale, c.state(t), "the marker names a process that exited")

	// Renamed over.
	tmp := c.marker + ".tmp"
	writeFile(t, tmp, "garbage")
	require.NoError(t, os.Rename(tmp, c.marker))
	assert.Equal(t, UpdateUnknown, c.state(t))

	require.NoError(t, os.Remove(c.marker))
	assert.Equal(t, UpdateUnverified, c.state(t))
}

// The marker's process dies between two stale answers: the same facts,
// judged again, are stale.
func TestStaleCacheMarkerProcessDies(t *testing.T) {
	c := newStaleCase(t)
	live := sleeper(t)
	writeMarker(t, c.marker, live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	assert.Equal(t, UpdateActive, c.state(t))
	require.NoError(t, live.Process.Kill())
	_, _ = live.Process.Wait()
	assert.Equal(t, UpdateStale, c.state(t), "the marker's process is gone")
}

// The clock passes the marker's age limit between two stale answers: the
// same facts are stale.
func TestStaleCacheMarkerAges(t *testing.T) {
	c := newStaleCase(t)
	writeMarker(t, c.marker, os.Getpid(), time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	assert.Equal(t, UpdateActive, c.state(t))
	c.ahead.Store(int64(DefaultMaxMarkerAge + time.Minute))
	assert.Equal(t, UpdateStale, c.state(t), "past the age limit")
	c.ahead.Store(0)
	assert.Equal(t, UpdateActive, c.state(t))
}

// A recovery marker made in the install, and removed, between stale
// answers.
func TestStaleCacheRecoveryMarker(t *testing.T) {
	c := newStaleCase(t)
	assert.Equal(t, UpdateUnverified, c.state(t))
	assert.Equal(t, UpdateUnverified, c.state(t))
	for _, name := range []string{hermesIncomplete, hermesLazy} {
		p := filepath.Join(c.dir, name)
		writeFile(t, p, "")
		assert.Equal(t, UpdateIncomplete, c.state(t), name)
		require.NoError(t, os.Remove(p))
		assert.Equal(t, UpdateUnverified, c.state(t), name+" removed")
	}
}

// A release tombstone (the marker renamed aside by its releaser) made
// beside an absent marker, between stale answers: active while its
// process lives.
func TestStaleCacheReleaseTombstone(t *testing.T) {
	c := newStaleCase(t)
	assert.Equal(t, UpdateUnverified, c.state(t))
	releaser := sleeper(t)
	tomb := fmt.Sprintf("%s%s%d-%s", c.marker, updater.ReleaseInfix, releaser.Process.Pid, "6f1c2a8e")
	writeMarker(t, tomb, releaser.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	require.NoError(t, releaser.Process.Kill())
	_, _ = releaser.Process.Wait()
	assert.Equal(t, UpdateUnverified, c.state(t), "the releaser is gone")
	writeFile(t, c.marker+".cas-claim-1", "")
	assert.Equal(t, UpdateUnknown, c.state(t), "an unresolved artifact")
}

// A profile home appears under the home, with a marker, between stale
// answers; and a marker in a profile home that was there already.
func TestStaleCacheProfileHomeAppears(t *testing.T) {
	c := newStaleCase(t)
	assert.Equal(t, UpdateUnverified, c.state(t))
	live := sleeper(t)
	profiles := filepath.Join(c.home, "profiles")
	require.NoError(t, os.Mkdir(profiles, 0o755))
	assert.Equal(t, UpdateUnverified, c.state(t))
	work := filepath.Join(profiles, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	assert.Equal(t, UpdateUnverified, c.state(t))
	writeMarker(t, filepath.Join(work, hermesMarker), live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t), "a profile's update runs")
	require.NoError(t, os.Remove(filepath.Join(work, hermesMarker)))
	assert.Equal(t, UpdateUnverified, c.state(t))

	// A profile home made with its marker already in it, then moved in.
	other := filepath.Join(c.home, "elsewhere")
	require.NoError(t, os.Mkdir(other, 0o755))
	writeMarker(t, filepath.Join(other, hermesMarker), live.Process.Pid, time.Now())
	assert.Equal(t, UpdateUnverified, c.state(t))
	require.NoError(t, os.Rename(other, filepath.Join(profiles, "moved-in")))
	assert.Equal(t, UpdateActive, c.state(t), "a profile home moved in with its marker")
}

// The stale answer from the cache opens nothing: no file of the updater
// is opened (inotify reports every open of a file or directory in the
// home and the install, which it watches for the test), and no process is
// asked about through the system (kill and /proc), the marker's process
// handle answering; with an active marker and with none.
func TestStaleCacheOpensNothing(t *testing.T) {
	for _, withMarker := range []bool{false, true} {
		t.Run(fmt.Sprintf("marker=%v", withMarker), func(t *testing.T) {
			c := newStaleCase(t)
			want := UpdateUnverified
			if withMarker {
				writeMarker(t, c.marker, sleeper(t).Process.Pid, time.Now())
				want = UpdateActive
			}
			assert.Equal(t, want, c.state(t))
			assert.Equal(t, want, c.state(t))

			in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
			require.NoError(t, err)
			defer unix.Close(in)
			for _, d := range []string{c.home, c.dir} {
				_, err := unix.InotifyAddWatch(in, d, unix.IN_OPEN|unix.IN_ACCESS)
				require.NoError(t, err)
			}
			// The control: an open there is seen.
			opened, err := os.Open(c.home)
			require.NoError(t, err)
			opened.Close()
			require.Positive(t, inotifyEvents(t, in), "an open of the home is reported")

			// A change of the mount table (another process's mount)
			// rightly makes the updater's files read again: the
			// checks during which one happened are made again, at
			// most twice.
			w, err := watch.Shared()
			require.NoError(t, err)
			const checks = 1000
			for attempt := 0; ; attempt++ {
				mounts := w.MountChanges()
				probes, opens := c.probes.Load(), c.opens.Load()
				for i := 0; i < checks; i++ {
					var se *StaleError
					require.ErrorAs(t, c.g.EnsureCurrent(), &se)
					require.Equal(t, want, se.State)
				}
				events := inotifyEvents(t, in)
				if w.MountChanges() != mounts && attempt < 2 {
					continue
				}
				assert.Zero(t, events, "opens and reads of the updater's files during %d stale answers", checks)
				assert.Equal(t, probes, c.probes.Load(), "processes asked about through the system")
				assert.Equal(t, opens, c.opens.Load(), "safe opens of the updater's files")
				break
			}
		})
	}
}

// inotifyEvents reads and counts the events queued on the non-blocking
// inotify descriptor in.
func inotifyEvents(t *testing.T, in int) int {
	t.Helper()
	buf := make([]byte, 64<<10)
	n := 0
	for {
		got, err := unix.Read(in, buf)
		if err == unix.EAGAIN {
			return n
		}
		require.NoError(t, err)
		for off := 0; off+unix.SizeofInotifyEvent <= got; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			n++
		}
	}
}

// A home on a file system whose changes inotify may not report (FUSE
// here) is never cached: every stale answer reads it on the flight of the
// updater's reads, and once it stops answering, every stale answer still
// returns within ReadTimeout, unknown, with one request at most blocked
// on it, the checkout itself on the watch path.
func TestStaleCacheHungHomeOnTheWatchPath(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	f := hungMount(t, nil)
	g, err := newGuard(Options{ModulePath: module, HomeDir: f.Dir, ReadTimeout: hangTimeout}, watchEnv(t))
	require.NoError(t, err)
	defer g.Close()
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g))
	commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, UpdateUnverified, se.State)
	_, cached := g.bound.Load().cachedStale(g.config())
	assert.False(t, cached, "a home on FUSE is not cached")

	f.Hang()
	for _, err := range checksReturn(t, g) {
		require.ErrorAs(t, err, &se)
		assert.NoError(t, se.Err, "the checkout itself was read")
		assert.Equal(t, UpdateUnknown, se.State)
	}
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}

// A deploy flips the configured path's link to another clone between
// stale answers: the cache answers for the install directories of the
// latest full read, and a recovery marker made in the new clone after the
// cached answers is seen.
func TestStaleCacheFollowsTheFlippedLink(t *testing.T) {
	tmp := tempDir(t)
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	agentRepo(t, a)
	agentRepo(t, b)
	commit(t, b, "run_agent.py", "class AIAgent: clone = 'b'\n")
	current := filepath.Join(tmp, "current")
	require.NoError(t, os.Symlink(a, current))
	g, err := newGuard(Options{ModulePath: filepath.Join(current, "run_agent.py"), HomeDir: tempDir(t)}, watchEnv(t))
	require.NoError(t, err)
	defer g.Close()
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g))

	require.NoError(t, os.Symlink(b, current+".new"))
	require.NoError(t, os.Rename(current+".new", current))
	c := &staleCase{g: g}
	assert.Equal(t, UpdateUnverified, c.state(t))
	assert.Equal(t, UpdateUnverified, c.state(t))
	o := g.observe(g.config(), g.bound.Load())
	assert.Contains(t, o.InstallRoots, resolved(t, b))
	writeFile(t, filepath.Join(b, hermesIncomplete), "")
	assert.Equal(t, UpdateIncomplete, c.state(t), "a recovery marker in the clone the link now leads to")
}

// A profile home that is a link to a directory not yet made, which is then
// made with a marker in it: no name in the profiles directory changes, yet
// the profile's update runs. Neither the stale answer's cache nor the
// listing of the profile homes may keep the home out.
func TestStaleCacheProfileHomeLinkTargetAppears(t *testing.T) {
	c := newStaleCase(t)
	live := sleeper(t)
	profiles := filepath.Join(c.home, "profiles")
	require.NoError(t, os.Mkdir(profiles, 0o755))
	target := filepath.Join(filepath.Dir(c.home), "later", "work")
	require.NoError(t, os.Symlink(target, filepath.Join(profiles, "work")))
	// Settled (past the racy margin), so that a listing of the profiles
	// directory is kept.
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, UpdateUnverified, c.state(t))
	assert.Equal(t, UpdateUnverified, c.state(t))

	require.NoError(t, os.MkdirAll(target, 0o755))
	writeMarker(t, filepath.Join(target, hermesMarker), live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t), "the linked profile's update runs")
	fresh, err := New(Options{ModulePath: c.g.bound.Load().configured, HomeDir: c.home, NoWatch: true})
	require.NoError(t, err)
	defer fresh.Close()
	assert.Equal(t, UpdateActive, fresh.Observe().State, "a fresh guard's observation")
}
