package gittest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that keeps what Still reports to it.
type recorder struct {
	testing.TB
	errs   []string
	logs   int
	failed bool
}

func (r *recorder) Helper()             {}
func (r *recorder) Error(args ...any)   { r.errs = append(r.errs, fmt.Sprint(args...)) }
func (r *recorder) Logf(string, ...any) { r.logs++ }
func (r *recorder) FailNow()            { r.failed = true }

// A round that failed while events came is run again, its failures
// dropped; the first round during which none came is the one reported,
// whether it passes or fails; a require that fails ends the round, not the
// test's goroutine; and after five rounds each with events, the last is
// reported as it is.
func TestStill(t *testing.T) {
	t.Run("a failure the events explain", func(t *testing.T) {
		var events uint64
		rounds := 0
		r := &recorder{TB: t}
		Still(r, func() uint64 { return events }, func(c *Trial) {
			rounds++
			if rounds < 3 {
				events++ // an event came meanwhile, and the round failed
				require.Fail(c, "explained")
			}
		})
		assert.Equal(t, 3, rounds)
		assert.Empty(t, r.errs)
		assert.False(t, r.failed)
		assert.Equal(t, 2, r.logs, "each round run again says why")
	})
	t.Run("a failure with no event", func(t *testing.T) {
		rounds := 0
		r := &recorder{TB: t}
		Still(r, func() uint64 { return 0 }, func(c *Trial) {
			rounds++
			assert.Equal(c, 1, 2, "one")
			require.Fail(c, "two")
			t.Error("the round goes on past a failed require")
		})
		assert.Equal(t, 1, rounds)
		require.Len(t, r.errs, 2)
		assert.Contains(t, r.errs[0], "one")
		assert.Contains(t, r.errs[1], "two")
		assert.True(t, r.failed, "a failed require fails the test")
	})
	t.Run("events in every round", func(t *testing.T) {
		var events uint64
		rounds := 0
		r := &recorder{TB: t}
		Still(r, func() uint64 { return events }, func(c *Trial) {
			rounds++
			events++
			assert.Fail(c, fmt.Sprint("round ", rounds))
		})
		assert.Equal(t, stillRounds, rounds)
		require.Len(t, r.errs, 1, "only the last round's failures")
		assert.Contains(t, r.errs[0], fmt.Sprint("round ", stillRounds))
		assert.False(t, r.failed, "no require failed")
	})
	t.Run("a panic of the round's own", func(t *testing.T) {
		r := &recorder{TB: t}
		assert.PanicsWithValue(t, "own", func() {
			Still(r, func() uint64 { return 0 }, func(*Trial) { panic("own") })
		})
	})
}
