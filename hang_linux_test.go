package runtimeguard

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fusehang"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// hangTimeout is the ReadTimeout of the tests on a hung file system, and
// hangChecks the checks each makes at once.
const (
	hangTimeout = 200 * time.Millisecond
	hangChecks  = 8
)

// hungMount mounts a FUSE file system of the test's own at a new
// directory, holding links, that stops answering at Hang.
func hungMount(t *testing.T, links map[string]string) *fusehang.FS {
	t.Helper()
	mnt := filepath.Join(tempDir(t), "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	return fusehang.Mount(t, mnt, links)
}

// checksReturn makes hangChecks checks at once, twice over, and requires
// each to return within a bound well under what a blocked check would
// take; it returns their errors.
func checksReturn(t *testing.T, g *Guard) []error {
	t.Helper()
	var errs []error
	for round := 0; round < 2; round++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		done := make(chan struct{})
		for i := 0; i < hangChecks; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := g.EnsureCurrent()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}()
		}
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * hangTimeout):
			mu.Lock()
			n := len(errs)
			mu.Unlock()
			t.Fatalf("%d of %d checks still blocked after %v with ReadTimeout %v", 2*hangChecks-n-(1-round)*hangChecks, hangChecks, 10*hangTimeout, hangTimeout)
		}
	}
	return errs
}

// The stat path of an unchanged checkout whose configured path's link is
// on a file system that stops answering: every check fails closed within
// ReadTimeout, naming the link, and one goroutine at most is blocked on
// the checkout, whatever the number of checks.
func TestStatPathOnAHungFileSystem(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	f := hungMount(t, map[string]string{"agent": dir})
	configured := filepath.Join(f.Dir, "agent", "run_agent.py")
	g, err := newGuard(Options{ModulePath: configured, HomeDir: tempDir(t), ReadTimeout: hangTimeout}, settledEnv())
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	require.Equal(t, gittest.Resolved(t, module), g.Identity().ModulePath)
	require.True(t, trusted(g), "the stat path vouches for the checkout")
	require.Equal(t, "stat", g.Observe().Check)

	f.Hang()
	for _, err := range checksReturn(t, g) {
		assert.ErrorIs(t, err, ErrStale)
		assert.ErrorIs(t, err, ErrReadTimeout)
		assert.ErrorContains(t, err, filepath.Join(f.Dir, "agent"), "the error names what hung")
	}
	// Capture of the path the guard is bound to verifies as a check does.
	captured := make(chan error, 1)
	go func() { captured <- g.Capture(configured) }()
	select {
	case err := <-captured:
		assert.ErrorIs(t, err, ErrReadTimeout)
	case <-time.After(10 * hangTimeout):
		t.Fatal("Capture of the bound path waited on the hung file system")
	}
	// One stat of the link hangs; the stale answers' diagnostics, which
	// resolve the configured path again, hang one more read.
	assert.LessOrEqual(t, f.Pending(), 2, "requests blocked on the hung file system")
}

// A stale answer reads the updater's files: with its home on a file system
// that stops answering, every stale check still returns within
// ReadTimeout, its state unknown, and the diagnostic says why.
func TestStaleAnswerOnAHungHome(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	f := hungMount(t, nil)
	g, err := newGuard(Options{ModulePath: module, HomeDir: f.Dir, ReadTimeout: hangTimeout}, settledEnv())
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")

	f.Hang()
	for _, err := range checksReturn(t, g) {
		var se *StaleError
		require.ErrorAs(t, err, &se)
		assert.NoError(t, se.Err, "the checkout itself was read")
		assert.Equal(t, UpdateUnknown, se.State)
	}
	start := time.Now()
	o := g.Observe()
	assert.Less(t, time.Since(start), 10*hangTimeout)
	assert.Equal(t, UpdateUnknown, o.State)
	assert.Equal(t, MarkerUnknown, o.Marker)
	assert.Contains(t, o.MarkerReason, "return")
	assert.Contains(t, o.MarkerReason, ErrReadTimeout.Error())
	assert.Equal(t, filepath.Join(f.Dir, ".hermes-update-in-progress"), o.MarkerPath)
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}

// The same for the venv's root, searched for recovery markers, on a hung
// file system: the interpreter lives in <root>/venv/bin.
func TestStaleAnswerOnAHungVenvRoot(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	f := hungMount(t, nil)
	python := filepath.Join(f.Dir, "venv", "bin", "python")
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t), Python: python, ReadTimeout: hangTimeout}, settledEnv())
	require.NoError(t, err)
	gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")

	f.Hang()
	for _, err := range checksReturn(t, g) {
		var se *StaleError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, UpdateUnknown, se.State)
	}
	o := g.Observe()
	assert.Equal(t, UpdateUnknown, o.State)
	assert.Contains(t, o.InstallRoots, f.Dir)
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}

// hungHome is a guard on a checkout that answers, whose updater's home is
// reached through a link on a file system that stops answering at
// f.Hang, with the layout's receipt and lock; the checkout has moved one
// commit since it bound.
func hungHome(t *testing.T, timeout time.Duration) (*reloadCase, *fusehang.FS) {
	t.Helper()
	tmp := tempDir(t)
	home := filepath.Join(tmp, "home")
	c := &reloadCase{dir: filepath.Join(home, "hermes-agent"), layout: HermesLayout}
	require.NoError(t, os.MkdirAll(home, 0o755))
	f := hungMount(t, map[string]string{"home": home})
	c.home = filepath.Join(f.Dir, "home")
	c.layout.Lock = "update.lock"
	c.module, c.loaded = agentRepo(t, c.dir)
	var err error
	c.g, err = New(Options{ModulePath: c.module, HomeDir: c.home, Layout: c.layout, ReadTimeout: timeout})
	require.NoError(t, err)
	t.Cleanup(func() { c.g.Close() })
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	return c, f
}

// awaitPending waits until a call is blocked on the hung file system f.
func awaitPending(t *testing.T, f *fusehang.FS) {
	t.Helper()
	require.Eventually(t, func() bool { return f.Pending() > 0 }, 10*time.Second, time.Millisecond, "no call reached the hung file system")
}

// New with the updater's home on a file system that does not answer
// returns within ReadTimeout, with an error matching ErrReadTimeout, as
// it does for a checkout that does not answer.
func TestNewWithAHungHome(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	f := hungMount(t, map[string]string{"home": tempDir(t)})
	f.Hang()
	made := make(chan error, 1)
	go func() {
		_, err := New(Options{ModulePath: module, HomeDir: filepath.Join(f.Dir, "home"), ReadTimeout: hangTimeout})
		made <- err
	}()
	select {
	case err := <-made:
		assert.ErrorIs(t, err, ErrReadTimeout)
		assert.ErrorContains(t, err, "receipts")
	case <-time.After(10 * hangTimeout):
		t.Fatalf("New waited on the hung home:\n%s", allStacks())
	}
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}

// Close returns at once while a Plan.Bind waits on a home that does not
// answer (Plan.Bind holds no lock of the guard while it reads), and the
// Plan.Bind returns once its context ends.
func TestCloseWithAPlanBindHung(t *testing.T) {
	c, f := hungHome(t, time.Hour)
	c.success(t)
	require.ErrorIs(t, c.g.EnsureCurrent(), ErrStale)
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer r.Release()

	f.Hang()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rebound := make(chan error, 1)
	go func() { rebound <- r.Bind(ctx) }()
	awaitPending(t, f)
	closed := make(chan struct{})
	go func() { c.g.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the Plan.Bind blocked on the hung home")
	}
	cancel()
	select {
	case err := <-rebound:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Plan.Bind went on waiting for the hung home after its context ended")
	}
	assert.Equal(t, c.loaded, c.g.Identity().Revision, "the guard stays on the old code")
}

// A Reloader whose plan waits on a home that does not answer stops within
// ReadTimeout once its context ends: Done closes.
func TestReloaderDoneWithAHungHome(t *testing.T) {
	c, f := hungHome(t, hangTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl, err := NewReloader(ctx, c.g, ReloaderOptions{
		Restart:       func(context.Context, *Plan) error { return nil },
		ProofInterval: 10 * time.Millisecond,
	})
	require.NoError(t, err)
	f.Hang()
	require.ErrorIs(t, c.g.EnsureCurrent(), ErrStale) // the Reloader plans from now on
	require.Eventually(t, func() bool { return rl.plans.Load() > 0 }, 10*time.Second, time.Millisecond, "no plan began")
	cancel()
	select {
	case <-rl.Done():
	case <-time.After(10 * hangTimeout):
		t.Fatal("the Reloader's Done stayed open after its context ended, with the home hung")
	}
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}
