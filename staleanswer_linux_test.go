package runtimeguard

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/updater"
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
	c.dir, c.home = filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
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
	u.Probe = func(pid int64) updater.ProcInfo {
		c.probes.Add(1)
		return updater.ProbeProcess(pid)
	}
	e.upd = &u
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
// after checking that it says what a read of the same files says now.
func (c *staleCase) state(t *testing.T) UpdateState {
	t.Helper()
	time.Sleep(staleReuse) // past the answer before's read
	err := c.g.EnsureCurrent()
	var se *StaleError
	require.ErrorAs(t, err, &se)
	b := c.g.bound.Load()
	o := c.g.config().observeAt(noReceipt, b.installDirs(true)...)
	assert.Equal(t, o.State, se.State, "the stale answer against a read of the updater's files")
	return se.State
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
// renamed over, are read again: no answer keeps what the file said.
func TestStaleAnswerMarkerRewritten(t *testing.T) {
	c := newStaleCase(t)
	live := sleeper(t)
	writeMarker(t, c.marker, live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	assert.Equal(t, UpdateActive, c.state(t))

	// In place: the same file, truncated and written.
	f, err := os.OpenFile(c.marker, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "%d\n%d\n", gittest.ExitedPID(t, processGone), time.Now().Unix())
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, UpdateAbandoned, c.state(t), "the marker names a process that exited")

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
func TestStaleAnswerMarkerProcessDies(t *testing.T) {
	c := newStaleCase(t)
	live := sleeper(t)
	writeMarker(t, c.marker, live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	assert.Equal(t, UpdateActive, c.state(t))
	require.NoError(t, live.Process.Kill())
	_, _ = live.Process.Wait()
	assert.Equal(t, UpdateAbandoned, c.state(t), "the marker's process is gone")
}

// Stale answers that come within staleReuse of one that read the
// updater's files answer with its read, reading and probing nothing; the
// first after it reads them again and sees the updater's process gone.
func TestStaleAnswersShareARecentRead(t *testing.T) {
	c := newStaleCase(t)
	live := sleeper(t)
	writeMarker(t, c.marker, live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	for tries := 0; ; tries++ {
		start := time.Now()
		opens, probes := c.opens.Load(), c.probes.Load()
		var se *StaleError
		require.ErrorAs(t, c.g.EnsureCurrent(), &se)
		n := 0
		for ; n < 20 && time.Since(start) < staleReuse/2; n++ {
			require.ErrorAs(t, c.g.EnsureCurrent(), &se)
			assert.Equal(t, UpdateActive, se.State)
		}
		if time.Since(start) >= staleReuse/2 && tries < 20 {
			continue // the machine paused: again
		}
		require.Equal(t, 20, n)
		// The first check may read (the one before is older); the
		// twenty after it read nothing.
		assert.LessOrEqual(t, c.opens.Load()-opens, int64(1), "safe opens of the updater's files")
		assert.LessOrEqual(t, c.probes.Load()-probes, int64(1), "probes of the updater's process")
		break
	}
	require.NoError(t, live.Process.Kill())
	_, _ = live.Process.Wait()
	assert.Equal(t, UpdateAbandoned, c.state(t), "past staleReuse, the marker's process is gone")
}

// The clock passes the marker's age limit between two stale answers: the
// same facts are stale.
func TestStaleAnswerMarkerAges(t *testing.T) {
	c := newStaleCase(t)
	writeMarker(t, c.marker, os.Getpid(), time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	assert.Equal(t, UpdateActive, c.state(t))
	c.ahead.Store(int64(DefaultMaxMarkerAge + time.Minute))
	assert.Equal(t, UpdateAbandoned, c.state(t), "past the age limit")
	c.ahead.Store(0)
	assert.Equal(t, UpdateActive, c.state(t))
}

// A recovery marker made in the install, and removed, between stale
// answers.
func TestStaleAnswerRecoveryMarker(t *testing.T) {
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
func TestStaleAnswerReleaseTombstone(t *testing.T) {
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
func TestStaleAnswerProfileHomeAppears(t *testing.T) {
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

// A home on a file system that stops answering (FUSE here), the
// checkout on the watch path: once it stops answering, every stale answer still
// returns within ReadTimeout, unknown, with one request at most blocked
// on it, the checkout itself on the watch path.
func TestStaleAnswerHungHomeOnTheWatchPath(t *testing.T) {
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

	f.Hang()
	time.Sleep(staleReuse) // past the answer before's read
	for _, err := range checksReturn(t, g) {
		require.ErrorAs(t, err, &se)
		assert.NoError(t, se.Err, "the checkout itself was read")
		assert.Equal(t, UpdateUnknown, se.State)
	}
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}

// A profile home that is a link to a directory not yet made, which is then
// made with a marker in it: no name in the profiles directory changes, yet
// the profile's update runs. The listing of the profile homes may not keep
// the home out.
func TestStaleAnswerProfileHomeLinkTargetAppears(t *testing.T) {
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
	fresh, err := New(Options{ModulePath: c.g.bound.Load().configured, HomeDir: c.home, Check: "stat"})
	require.NoError(t, err)
	defer fresh.Close()
	assert.Equal(t, UpdateActive, fresh.Observe().State, "a fresh guard's observation")
}
