package runtimeguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A bound checkout turned into a format the guard does not read fails
// closed, and its 409 and its log say that the repository format is
// unsupported, not only "restart": a restart would fail at New, which says
// the same. The payload's keys stay those of every stale answer.
func TestUnsupportedFormatAfterBindingSaysSo(t *testing.T) {
	for name, setup := range map[string]func(dir string){
		"split index": func(dir string) { git(t, dir, "update-index", "--split-index") },
		"unknown extension": func(dir string) {
			git(t, dir, "config", "core.repositoryformatversion", "1")
			git(t, dir, "config", "extensions.someFutureThing", "true")
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := tempDir(t)
			module, rev := agentRepo(t, dir)
			var log bytes.Buffer
			g, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Logger: slog.New(slog.NewTextHandler(&log, nil))})
			require.NoError(t, err)
			require.NoError(t, g.EnsureCurrent())
			own, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Message: "Restart by hand."})
			require.NoError(t, err)

			setup(dir)
			if name == "split index" {
				assert.Equal(t, rev, git(t, dir, "rev-parse", "HEAD"), "git reads it at the same revision")
			}
			err = g.EnsureCurrent()
			require.ErrorIs(t, err, ErrStale)
			require.ErrorIs(t, err, errors.ErrUnsupported)
			var se *StaleError
			require.ErrorAs(t, err, &se)
			assert.Contains(t, se.Message, "repository format")
			assert.Contains(t, se.Message, "not supported")
			assert.NotEqual(t, defaultMessage, se.Message, "a restart alone does not help")
			assert.NotContains(t, strings.ToLower(se.Message), "success")

			msg, err := json.Marshal(se.Message)
			require.NoError(t, err)
			rec := httptest.NewRecorder()
			WriteStale(rec, se)
			assert.Equal(t, 409, rec.Code)
			assert.JSONEq(t, `{"error":`+string(msg)+`,"type":"agent_runtime_stale","retryable":true,"restart_scheduled":false,"agent_update_state":"unverified"}`, rec.Body.String())

			assert.Contains(t, log.String(), "repository format is not supported", "the log says why, not only that it is stale")

			// The restart the message asks for would fail so.
			_, err = New(Options{ModulePath: module, HomeDir: tempDir(t)})
			assert.ErrorIs(t, err, errors.ErrUnsupported)

			// The host's own message is the host's word, in this case too.
			err = own.EnsureCurrent()
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "Restart by hand.", se.Message)
		})
	}
}

// While a reload is scheduled its message stands, as the payload's
// restart_scheduled says, even where the checkout turned unsupported
// meanwhile; once the plan is released the message says the format is
// not supported.
func TestUnsupportedFormatWhileAReloadIsScheduled(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	require.ErrorIs(t, c.g.EnsureCurrent(), ErrStale)
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	require.NoError(t, r.Schedule())

	git(t, c.dir, "update-index", "--split-index")
	var se *StaleError
	require.ErrorAs(t, c.g.EnsureCurrent(), &se)
	require.ErrorIs(t, se, errors.ErrUnsupported)
	assert.True(t, se.RestartScheduled)
	assert.Contains(t, se.Message, "retry shortly")

	r.Release()
	require.ErrorAs(t, c.g.EnsureCurrent(), &se)
	assert.False(t, se.RestartScheduled)
	assert.Contains(t, se.Message, "repository format that is not supported")
}
