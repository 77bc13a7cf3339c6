package runtimeguard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probeAnswer is what a probe answered.
type probeAnswer struct {
	code       int
	retryAfter string
	body       map[string]any
}

func probe(t *testing.T, url string) probeAnswer {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := probeAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	require.NoError(t, json.Unmarshal(raw, &a.body), "%s", raw)
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	return a
}

// healthCase is a reloaderCase whose restart waits, on purpose, until the
// test lets it go, served with both probes mounted beside the guarded
// handlers.
type healthCase struct {
	*reloaderCase
	probes  *httptest.Server
	started chan struct{} // the restart began
	finish  chan error    // what the restart returns
}

func newHealthCase(t *testing.T) *healthCase {
	t.Helper()
	h := &healthCase{started: make(chan struct{}, 1), finish: make(chan error)}
	h.reloaderCase = newReloaderCaseWith(t, nil, func(ro *ReloaderOptions) {
		ro.Restart = func(ctx context.Context, _ *Plan) error {
			h.started <- struct{}{}
			select {
			case err := <-h.finish:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	mux := http.NewServeMux()
	mux.Handle("GET /livez", h.g.LivenessHandler())
	mux.Handle("GET /readyz", h.g.ReadinessHandler())
	mux.Handle("/", h.srv.Config.Handler) // the Reloader's wrap of the application
	h.probes = httptest.NewServer(mux)
	t.Cleanup(h.probes.Close)
	return h
}

// restartBegan waits, at most 10 s, for the restart to begin.
func (h *healthCase) restartBegan(t *testing.T) {
	t.Helper()
	select {
	case <-h.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no restart began")
	}
}

// live checks that the liveness probe answers 200 with the bound revision.
func (h *healthCase) live(t *testing.T, revision string) {
	t.Helper()
	a := probe(t, h.probes.URL+"/livez")
	assert.Equal(t, http.StatusOK, a.code)
	assert.Equal(t, map[string]any{"live": true, "revision": revision}, a.body)
}

// The readiness probe of a server that reloads by itself: ready while
// current, while stale and waiting for the update's proof, and while stale
// with no reload coming; not ready, saying why in the 409's words, from
// the moment the reload is scheduled until the new code is bound; ready
// again after. The liveness probe answers 200 throughout, and neither is
// turned into a 409.
func TestHealthAcrossAReload(t *testing.T) {
	h := newHealthCase(t)
	ready := probe(t, h.probes.URL+"/readyz")
	assert.Equal(t, http.StatusOK, ready.code)
	assert.Equal(t, map[string]any{"ready": true, "stale": false, "revision": h.loaded, "restart_scheduled": false}, ready.body)
	h.live(t, h.loaded)

	// The update runs: stale, its proof awaited, nothing scheduled.
	marker := filepath.Join(h.home, hermesMarker)
	writeMarker(t, marker, os.Getpid(), time.Now())
	h.moved = commit(t, h.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	require.Eventually(t, func() bool { return h.get(t, "/").payload.Error == h.g.config().autoMessage }, 10*time.Second, 5*time.Millisecond)
	ready = probe(t, h.probes.URL+"/readyz")
	assert.Equal(t, http.StatusOK, ready.code, "%v", ready.body)
	assert.Equal(t, true, ready.body["ready"])
	assert.Equal(t, true, ready.body["stale"])
	assert.Equal(t, h.g.config().autoMessage, ready.body["error"])
	assert.Equal(t, false, ready.body["restart_scheduled"])
	assert.Empty(t, ready.retryAfter)
	h.live(t, h.loaded)

	// The update finishes: the reload is scheduled, and the restart waits.
	writeFile(t, filepath.Join(receiptsDir(h.home), "latest.json"), string(hermesReceipt(t, "gen2-no-id-success.json", h.moved, time.Now())))
	require.NoError(t, os.Remove(marker))
	h.restartBegan(t)
	// A stale answer's update state may be one read of the updater's files
	// old (see Guard.observe): the answers compared are those after the
	// marker's removal was read.
	require.Eventually(t, func() bool {
		ready = probe(t, h.probes.URL+"/readyz")
		return ready.body["agent_update_state"] == string(UpdateUnverified)
	}, 10*time.Second, 5*time.Millisecond)
	conflict := h.get(t, "/")
	require.Equal(t, http.StatusConflict, conflict.code)
	require.True(t, conflict.payload.RestartScheduled)
	assert.Equal(t, http.StatusServiceUnavailable, ready.code, "%v", ready.body)
	assert.Equal(t, "1", ready.retryAfter)
	assert.Equal(t, map[string]any{"ready": false, "stale": true, "revision": h.loaded, "error": conflict.payload.Error,
		"restart_scheduled": true, "agent_update_state": string(conflict.payload.AgentUpdateState)}, ready.body)
	h.live(t, h.loaded)

	// The new code is loaded and bound: ready, current, at the new revision.
	h.finish <- nil
	require.Eventually(t, func() bool { return h.g.Stats().Reloads == 1 }, 10*time.Second, 5*time.Millisecond)
	ready = probe(t, h.probes.URL+"/readyz")
	assert.Equal(t, http.StatusOK, ready.code)
	assert.Equal(t, map[string]any{"ready": true, "stale": false, "revision": h.moved, "restart_scheduled": false}, ready.body)
	h.live(t, h.moved)
}

// A reload that is abandoned makes the server ready again, stale: it
// answers 409s that ask for a manual restart, and the readiness probe
// says so.
func TestHealthAfterAnAbandonedReload(t *testing.T) {
	h := newHealthCase(t)
	h.moved = commit(t, h.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(h.home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", h.moved, time.Now())))
	h.restartBegan(t)
	assert.Equal(t, http.StatusServiceUnavailable, probe(t, h.probes.URL+"/readyz").code)
	h.finish <- errors.New("the workers did not start")
	require.Eventually(t, func() bool { return h.g.Stats().ReloadsAbandoned == 1 }, 10*time.Second, 5*time.Millisecond)
	ready := probe(t, h.probes.URL+"/readyz")
	assert.Equal(t, http.StatusOK, ready.code)
	assert.Equal(t, true, ready.body["ready"])
	assert.Equal(t, true, ready.body["stale"])
	assert.Equal(t, false, ready.body["restart_scheduled"])
	assert.Equal(t, h.get(t, "/").payload.Error, ready.body["error"])
	h.live(t, h.loaded)
}

// A guard without a Reloader never reloads: stale, it stays ready, and
// the probe gives the 409's message.
func TestHealthWithoutAReloader(t *testing.T) {
	c := newReloadCase(t) // the checkout moved after the binding
	srv := httptest.NewServer(c.g.ReadinessHandler())
	defer srv.Close()
	ready := probe(t, srv.URL)
	assert.Equal(t, http.StatusOK, ready.code)
	assert.Equal(t, true, ready.body["ready"])
	assert.Equal(t, true, ready.body["stale"])
	assert.Equal(t, defaultMessage, ready.body["error"])
}
