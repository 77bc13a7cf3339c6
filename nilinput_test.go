package runtimeguard

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nilCtx is the nil context a careless host passes.
var nilCtx context.Context

// Every exported call that takes a context says at once that a nil one
// is an error, rather than panic on a goroutine of its own later; a
// Reloader with nothing to reload, or a negative duration, is refused too.
func TestNilContextsAreErrors(t *testing.T) {
	c := newReloadCase(t)
	restart := func(context.Context, *Plan) error { return nil }

	rl, err := NewReloader(nilCtx, c.g, ReloaderOptions{Restart: restart})
	assert.ErrorContains(t, err, "nil Context")
	assert.Nil(t, rl)
	_, err = NewReloader(context.Background(), c.g, ReloaderOptions{Restart: restart, DrainTimeout: -time.Second})
	assert.ErrorContains(t, err, "DrainTimeout")
	_, err = NewReloader(context.Background(), c.g, ReloaderOptions{Restart: restart, ProofInterval: -time.Second})
	assert.ErrorContains(t, err, "ProofInterval")
	_, err = NewReloader(context.Background(), c.g, ReloaderOptions{})
	assert.ErrorContains(t, err, "Restart")
	_, err = NewReloader(context.Background(), nil, ReloaderOptions{Restart: restart})
	assert.ErrorContains(t, err, "no guard")

	assert.ErrorContains(t, c.g.Watch(nilCtx, time.Second), "nil Context")
	assert.ErrorContains(t, c.g.Watch(context.Background(), 0), "not positive")
	assert.ErrorContains(t, c.g.Watch(context.Background(), -time.Second), "not positive")

	plan, err := c.g.PlanReload(nilCtx)
	assert.ErrorContains(t, err, "nil Context")
	assert.Nil(t, plan)

	c.success(t)
	plan, err = c.g.PlanReload(context.Background())
	require.NoError(t, err)
	h := &ExecHandover{
		Quiesce: func(context.Context) error { return nil },
		Resume:  func([]net.Listener) error { return nil },
	}
	assert.ErrorContains(t, h.Handover(nilCtx, plan), "nil Context")
	assert.ErrorContains(t, h.Handover(context.Background(), nil), "no plan")
	assert.ErrorContains(t, plan.Bind(nilCtx), "nil Context")
	assert.True(t, plan.isDone(), "the plan is done either way, as Bind's other failures leave it")
	assert.False(t, c.g.bound.Load().plans.isScheduled())
	// The guard can plan again: nothing was spent.
	plan, err = c.g.PlanReload(context.Background())
	require.NoError(t, err)
	plan.Release()

	// The refused Reloaders left nothing behind: one can start.
	ctx, cancel := context.WithCancel(context.Background())
	rl, err = NewReloader(ctx, c.g, ReloaderOptions{Restart: restart})
	require.NoError(t, err)
	cancel()
	<-rl.Done()
}

// A nil handler behind the middleware is http.DefaultServeMux, as it is
// for http.Server: no panic on the request's goroutine.
func TestNilHandlersServeTheDefaultMux(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
	require.NoError(t, err)
	defer g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl, err := NewReloader(ctx, g, ReloaderOptions{Restart: func(context.Context, *Plan) error { return nil }})
	require.NoError(t, err)
	defer func() { cancel(); <-rl.Done() }()
	for name, h := range map[string]http.Handler{"Middleware": g.Middleware(nil), "Wrap": rl.Wrap(nil)} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/runtimeguard-no-such-page", nil))
		body, _ := io.ReadAll(rec.Body)
		assert.Equal(t, http.StatusNotFound, rec.Code, "%s(nil): %s", name, body)
	}
}
