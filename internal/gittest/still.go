package gittest

import (
	"fmt"
	"testing"
)

// A Trial holds the failures of one round of [Still]. It is what the
// round's own assertions report to (it implements testify's
// require.TestingT); a require that fails ends the round.
type Trial struct {
	errs []string
}

// Errorf records a failure of the round.
func (c *Trial) Errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// FailNow ends the round: [Still] reports it, or runs the round again.
func (c *Trial) FailNow() { panic(c) }

// Helper is a no-op: the failures are reported at the round's end, by
// Still, which marks itself a helper.
func (c *Trial) Helper() {}

// run runs round and reports whether a FailNow ended it.
func (c *Trial) run(round func(c *Trial)) (ended bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != any(c) {
				panic(p)
			}
			ended = true
		}
	}()
	round(c)
	return false
}

// stillRounds bounds the rounds of Still.
const stillRounds = 5

// Still runs round until events (a count that only grows) did not move
// while it ran, at most five times, and reports the failures of that
// last round to tb. It is for a round whose assertions an event outside
// the test explains: a mount made by any process in the mount namespace
// (another test package's FUSE file system) makes every inotify
// subscription of the watch path read again, rightly, so a round that
// shows the watch path reading nothing, or blind to a write it cannot
// see, shows nothing when one came during it.
//
// Each round holds the tests' mount lock (see LockMounts), so the mounts
// of this repository's tests, in any of their processes, do not come
// during it; a round must not mount.
//
// The round reports what such an event may explain to c; what it reports
// to tb itself (its repository, its guards) fails the test as ever.
func Still(tb testing.TB, events func() uint64, round func(c *Trial)) {
	tb.Helper()
	for i := 1; ; i++ {
		c := &Trial{}
		unlock := LockMounts(tb)
		before := events()
		ended := c.run(round)
		moved := events() - before
		unlock()
		if moved == 0 || i == stillRounds {
			if moved != 0 {
				tb.Logf("the events the test does not make came in each of %d rounds (%d in the last)", i, moved)
			}
			for _, e := range c.errs {
				tb.Error(e)
			}
			if ended {
				tb.FailNow()
			}
			return
		}
		tb.Logf("round %d: %d events the test does not make came meanwhile, so it runs again (%d failures dropped)", i, moved, len(c.errs))
	}
}
