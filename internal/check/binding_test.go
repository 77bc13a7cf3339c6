package check

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// testEnv reads the checkout through fs, with no inotify watcher: the
// stat path.
type testEnv struct{ fs *gitread.FS }

func (e testEnv) Now() time.Time                   { return time.Now() }
func (e testEnv) FS() *gitread.FS                  { return e.fs }
func (e testEnv) Watcher() (*watch.Watcher, error) { return nil, errors.New("no watcher in this test") }

// testErrors marks each error with the hook that made it.
var testErrors = Errors{
	Timeout:    func(msg string) error { return fmt.Errorf("timeout: %s", msg) },
	NoRevision: func(reason string) error { return fmt.Errorf("no revision: %s", reason) },
	Panic:      func(v any, stack []byte) error { return fmt.Errorf("panic: %v", v) },
}

// bound binds a new binding to the checkout of module, as a guard's bind
// does, and returns it with its counters.
func bound(t *testing.T, x *Executor, e Env, module string) (*Binding, *atomic.Uint64, *atomic.Uint64) {
	t.Helper()
	abs, err := gitread.Abs(module)
	require.NoError(t, err)
	var reads, timeouts atomic.Uint64
	b := NewBinding(x, abs, nil, nil, &reads, &timeouts, testErrors)
	t.Cleanup(b.Close)
	call, err := b.Look(context.Background(), e, false, time.Minute, true)
	require.NoError(t, err)
	require.NoError(t, call.Val.Err)
	b.Bind(&call.Val.Checkout)
	return b, &reads, &timeouts
}

// A binding answers with the checkout's revision, from its snapshot while
// a stat of each file finds it unchanged, and reads again once HEAD moved;
// off the watch path it says why.
func TestBindingFollowsHEAD(t *testing.T) {
	gittest.Need(t)
	dir := gittest.TempDir(t)
	module, rev := gittest.Agent(t, dir)
	var x Executor
	e := testEnv{gitread.System}
	b, reads, _ := bound(t, &x, e, module)
	require.NotNil(t, b.Snap())
	assert.Equal(t, rev, b.Snap().Rev)
	assert.Equal(t, uint64(1), reads.Load())

	got, err := b.Current(e, false, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, rev, got)
	mode, why := b.Path(false)
	assert.Equal(t, Stat, mode)
	assert.Equal(t, "no watcher in this test", why)
	mode, _ = b.Path(true)
	assert.Equal(t, Read, mode)

	next := gittest.Commit(t, dir, "other.txt", "x\n")
	require.NotEqual(t, rev, next)
	got, err = b.Current(e, false, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, next, got)
	for _, resolve := range []bool{false, true} {
		assert.Equal(t, []string{filepath.Dir(gittest.Resolved(t, module))}, b.InstallDirs(filepath.Dir(gittest.Resolved(t, module)), resolve))
	}
}

// A look that its caller gave up on answers with Errors.Timeout, naming
// what the executor is blocked on, and is counted; a read that panics
// answers with Errors.Panic.
func TestBindingErrorsInItsOwnersWords(t *testing.T) {
	gittest.Need(t)
	dir := gittest.TempDir(t)
	module, _ := gittest.Agent(t, dir)
	var x Executor
	var boom atomic.Bool
	fs := *gitread.System
	fs.Stat = func(p string) (fsread.Stamp, error) {
		if boom.Load() {
			panic("the stat broke")
		}
		return gitread.System.Stat(p)
	}
	e := testEnv{&fs}
	b, _, timeouts := bound(t, &x, e, module)

	release := make(chan struct{})
	running := make(chan struct{})
	held := "/held"
	go func() {
		_, _ = Submit(context.Background(), &x, nil, time.Hour, func(t *Task[int]) {
			t.At.Store(&held)
			close(running)
			<-release
		}, nil)
	}()
	<-running
	_, err := b.Current(e, false, 10*time.Millisecond)
	close(release)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "timeout: a look at "+b.Configured())
	assert.Contains(t, err.Error(), ", blocked on /held")
	assert.Equal(t, uint64(1), timeouts.Load())

	boom.Store(true)
	_, err = b.Current(e, true, time.Minute)
	assert.EqualError(t, err, "panic: the stat broke")
}
