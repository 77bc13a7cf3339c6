package runtimeguard

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// statEnvOn is statEnv reading the checkout through fs.
func statEnvOn(fs *gitread.FS) *env {
	e := statEnv()
	e.git = fs
	return e
}

// boundBinding binds a new binding to the checkout of module, as a
// guard's bind does, with the options opts on e, and returns it with its
// counters.
func boundBinding(t *testing.T, opts Options, e *env, module string) (*binding, *counters) {
	t.Helper()
	cfg, err := opts.resolveOn(e)
	require.NoError(t, err)
	abs, err := gitread.Abs(module)
	require.NoError(t, err)
	counts := new(counters)
	b := newBinding(cfg, abs, time.Now(), nil, counts)
	t.Cleanup(b.close)
	call, err := b.look(context.Background(), time.Minute, true)
	require.NoError(t, err)
	require.NoError(t, call.Val.Err)
	c := call.Val.Checkout
	b.id = Identity{SourceDir: c.SourceDir, ModulePath: c.ModulePath, Revision: c.Revision}
	b.boundTo(&c)
	return b, counts
}

// A binding answers with the checkout's revision, from its snapshot while
// a stat of each file finds it unchanged, and reads again once HEAD moved;
// off the watch path it says why.
func TestBindingFollowsHEAD(t *testing.T) {
	gittest.Need(t)
	dir := gittest.TempDir(t)
	module, rev := gittest.Agent(t, dir)
	b, counts := boundBinding(t, Options{HomeDir: dir}, statEnv(), module)
	require.NotNil(t, b.snap.Load())
	assert.Equal(t, rev, b.snap.Load().Rev)
	assert.Equal(t, uint64(1), counts.fullReads.Load())

	got, err := b.current(time.Minute)
	require.NoError(t, err)
	assert.Equal(t, rev, got)
	mode, why := b.checkPath()
	assert.Equal(t, checkStat, mode)
	assert.Equal(t, "the watch path is off in this test", why)
	read, _ := boundBinding(t, Options{HomeDir: dir, Check: "read"}, statEnv(), module)
	mode, _ = read.checkPath()
	assert.Equal(t, checkRead, mode)

	next := gittest.Commit(t, dir, "other.txt", "x\n")
	require.NotEqual(t, rev, next)
	got, err = b.current(time.Minute)
	require.NoError(t, err)
	assert.Equal(t, next, got)
	for _, resolve := range []bool{false, true} {
		assert.Equal(t, []string{filepath.Dir(gittest.Resolved(t, module))}, b.installDirs(resolve))
	}
}

// A look that its caller gave up on answers with an error matching
// ErrReadTimeout, naming what the executor is blocked on, and is counted;
// a read that panics answers with a *PanicError.
func TestBindingErrorsInThePackagesWords(t *testing.T) {
	gittest.Need(t)
	dir := gittest.TempDir(t)
	module, _ := gittest.Agent(t, dir)
	fs := *gitread.System
	var boom atomic.Bool
	fs.Stat = func(p string) (fsread.Stamp, error) {
		if boom.Load() {
			panic("the stat broke")
		}
		return gitread.System.Stat(p)
	}
	b, counts := boundBinding(t, Options{HomeDir: dir}, statEnvOn(&fs), module)

	release := make(chan struct{})
	running := make(chan struct{})
	held := "/held"
	go func() {
		_, _ = bounded.Submit(context.Background(), b.x, nil, time.Hour, func(t *bounded.Task[int]) {
			t.At.Store(&held)
			close(running)
			<-release
		}, nil)
	}()
	<-running
	_, err := b.current(10 * time.Millisecond)
	close(release)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrReadTimeout)
	assert.Contains(t, err.Error(), "a look at "+b.configured)
	assert.Contains(t, err.Error(), ", blocked on /held")
	assert.Equal(t, uint64(1), counts.readTimeouts.Load())

	read, _ := boundBinding(t, Options{HomeDir: dir, Check: "read"}, statEnvOn(&fs), module)
	boom.Store(true)
	_, err = read.current(time.Minute)
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "the stat broke", pe.Value)
}
