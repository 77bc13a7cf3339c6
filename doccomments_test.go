package runtimeguard

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// No stale message may contain "success", inside a word too: a client
// that searches the message for it must not find it, and the error says
// so rather than speak of a word the value does not hold.
func TestDocMessageRefusesSuccessInsideAWord(t *testing.T) {
	for _, field := range []string{"Options.Message", "Options.ReloadMessage", "Options.AgentName", "Options.ServerName"} {
		for _, value := range []string{"Update unsuccessful", "SUCCESSFUL", "success"} {
			var opts Options
			switch field {
			case "Options.Message":
				opts.Message = value
			case "Options.ReloadMessage":
				opts.ReloadMessage = value
			case "Options.AgentName":
				opts.AgentName = value
			case "Options.ServerName":
				opts.ServerName = value
			}
			_, err := New(opts)
			var oe *OptionError
			require.ErrorAs(t, err, &oe, "%s %q", field, value)
			assert.Equal(t, field, oe.Field)
			assert.Contains(t, oe.Reason, `contains "success"`, "%s %q", field, value)
			assert.NotContains(t, oe.Reason, "the word", "%s %q: the value need not hold the word", field, value)
		}
	}
	_, err := New(Options{Message: "Update done: restart by hand."})
	assert.NoError(t, err)
}

// Watch refuses an interval that is not positive whatever path the guard
// takes, the watch path too: the path may change while Watch runs.
func TestWatchRejectsIntervalZeroOnEitherPath(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	for _, noWatch := range []bool{false, true} {
		g, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Check: map[bool]string{true: "stat"}[noWatch]})
		require.NoError(t, err)
		require.NoError(t, g.EnsureCurrent())
		for _, interval := range []time.Duration{0, -time.Second} {
			err := g.Watch(context.Background(), interval)
			assert.ErrorContains(t, err, "not positive", "check path %s, interval %v", g.Observe().Check, interval)
		}
		require.NoError(t, g.Close())
	}
}
