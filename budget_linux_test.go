package runtimeguard

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
)

// A check on the watch path whose snapshot was overtaken waits for the
// read that overtook it, and then, where that read's snapshot is dirty
// too, looks itself: the two waits share one ReadTimeout. Here the read
// waited for takes most of it (the test holds it), and the check's own
// look never returns: the check fails closed once ReadTimeout has passed
// since it began to wait, not a whole ReadTimeout after the first wait.
func TestCheckWaitsOneReadTimeoutInAll(t *testing.T) {
	const timeout = time.Second
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	head := filepath.Join(dir, ".git", "HEAD")
	config := filepath.Join(dir, ".git", "config")
	e := watchEnv(t)
	var gated atomic.Bool
	entered := make(chan struct{}, 16)
	release := make(chan struct{}, 16)
	fsys := *gitread.System
	fsys.ReadFile = func(p string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		if p == config && gated.Load() {
			entered <- struct{}{} // a full read reads the config once
			<-release
		}
		return gitread.System.ReadFile(p, limit, nofollow)
	}
	e.git = &fsys
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t), ReadTimeout: timeout}, e)
	require.NoError(t, err)
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g), "the guard took the watch path")
	require.NoError(t, g.EnsureCurrent())
	dirty := func() bool { s := g.bound.Load().snap.Load(); return s.Claim != nil && s.Claim.Dirty() }
	require.False(t, dirty())

	gated.Store(true)
	defer func() {
		gated.Store(false)
		for i := 0; i < cap(release); i++ {
			release <- struct{}{}
		}
	}()
	touch := func(at time.Time) { require.NoError(t, os.Chtimes(head, at, at)) }
	touch(time.Now().Add(time.Hour))
	require.Eventually(t, func() bool { return dirty() || !g.bound.Load().snap.Load().Claim.Unchanged() }, 5*time.Second, time.Millisecond, "the touch of HEAD was seen")

	// A finds the snapshot changed and reads: the test holds its read.
	errA := make(chan error, 1)
	go func() { errA <- g.EnsureCurrent() }()
	<-entered
	// B finds the snapshot overtaken by A's read and waits for it.
	type result struct {
		err  error
		took time.Duration
	}
	resB := make(chan result, 1)
	start := time.Now()
	go func() { err := g.EnsureCurrent(); resB <- result{err, time.Since(start)} }()
	time.Sleep(timeout * 6 / 10)
	// A change during A's read leaves its snapshot dirty: B, once A's read
	// returns, must look itself; its look is held for good.
	touch(time.Now().Add(2 * time.Hour))
	time.Sleep(50 * time.Millisecond)
	release <- struct{}{}
	require.NoError(t, <-errA)
	r := <-resB
	assert.ErrorIs(t, r.err, ErrReadTimeout)
	assert.GreaterOrEqual(t, r.took, timeout*9/10, "B gave up before its ReadTimeout")
	assert.Less(t, r.took, timeout*13/10, "B waited %v in all with ReadTimeout %v", r.took, timeout)
}
