package runtimeguard

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The counts follow what the checks did on a real checkout: checks, the
// 409s, the full reads (every check with Options.Check "read", none while nothing
// changed otherwise), and the checks that timed out.
func TestStatsCount(t *testing.T) {
	t.Parallel() // repositories and guards of its own; each waits out Git's racy window
	for _, alwaysRead := range []bool{false, true} {
		t.Run(map[bool]string{false: "stat", true: "always read"}[alwaysRead], func(t *testing.T) {
			t.Parallel()
			dir := tempDir(t)
			mod, _ := agentRepo(t, dir)
			// The stat path: a change of the mount table (another
			// process's mount) would make the watch path read again.
			g, err := New(Options{ModulePath: mod, HomeDir: dir, Check: map[bool]string{true: "read", false: "stat"}[alwaysRead]})
			require.NoError(t, err)
			bound := g.Stats()
			assert.Equal(t, Stats{FullReads: bound.FullReads}, bound, "binding is no check")
			require.GreaterOrEqual(t, bound.FullReads, uint64(1), "binding reads the checkout")

			// Past Git's racy window, so that stats prove the files unchanged.
			time.Sleep(1100 * time.Millisecond)
			require.NoError(t, g.EnsureCurrent()) // may read once more: a racy stamp
			settled := g.Stats().FullReads
			const n = 20
			for range n {
				require.NoError(t, g.EnsureCurrent())
			}
			s := g.Stats()
			assert.Equal(t, uint64(n+1), s.Checks)
			assert.Zero(t, s.Stale)
			if alwaysRead {
				assert.Equal(t, settled+n, s.FullReads, "every check reads")
			} else {
				assert.Equal(t, settled, s.FullReads, "an unchanged checkout is not read again")
			}

			commit(t, dir, "run_agent.py", "class AIAgent: v2\n")
			for range 3 {
				require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
			}
			s2 := g.Stats()
			assert.Equal(t, uint64(n+4), s2.Checks)
			assert.Equal(t, uint64(3), s2.Stale, "each stale answer counts")
			assert.Greater(t, s2.FullReads, s.FullReads, "the move is read")
			assert.Zero(t, s2.ReadTimeouts)
			assert.Zero(t, s2.Reloads+s2.ReloadsAbandoned)
		})
	}
}

// An unbound guard's checks count, and nothing else does.
func TestStatsUnbound(t *testing.T) {
	var g Guard
	for range 5 {
		require.NoError(t, g.EnsureCurrent())
	}
	assert.Equal(t, Stats{Checks: 5}, g.Stats())
}

// A check that gives up on a hung read counts as a timeout and a stale
// answer.
func TestStatsReadTimeouts(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	h := &hangingIndex{release: make(chan struct{})}
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir, ReadTimeout: 100 * time.Millisecond, Check: "read"}, h.env())
	require.NoError(t, err)
	h.hang.Store(true)
	for range 2 {
		err := g.EnsureCurrent()
		require.ErrorIs(t, err, ErrReadTimeout)
	}
	s := g.Stats()
	assert.Equal(t, uint64(2), s.ReadTimeouts)
	assert.Equal(t, uint64(2), s.Stale)
	h.hang.Store(false)
	close(h.release)
	timeouts := uint64(2)
	require.Eventually(t, func() bool {
		err := g.EnsureCurrent()
		if errors.Is(err, ErrReadTimeout) {
			timeouts++ // the hung read had not yet returned
		}
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, timeouts, g.Stats().ReadTimeouts, "each timed-out check counts, and no other")
}
