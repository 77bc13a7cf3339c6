package runtimeguard

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "bytes of %s", path)
}

var sampleStale = &StaleError{
	Message:  defaultMessage,
	State:    UpdateUnverified,
	Captured: "1111111111111111111111111111111111111111",
	Current:  "2222222222222222222222222222222222222222",
}

func TestWriteStaleGolden(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Length", "999")
	require.True(t, WriteStale(rec, fmt.Errorf("chat start: %w", sampleStale)))
	assert.Equal(t, http.StatusConflict, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	assert.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
	assert.Empty(t, rec.Header().Get("Content-Length"))
	golden(t, "stale-409.json", rec.Body.Bytes())
}

func TestPayloadKeys(t *testing.T) {
	for _, state := range []UpdateState{"", UpdateUnverified, UpdateActive, UpdateAbandoned, UpdateUnknown, UpdateIncomplete} {
		se := &StaleError{Message: "restart required", State: state}
		body, err := json.Marshal(se.Payload())
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(body, &m))
		want := map[string]any{"error": "restart required", "type": PayloadType, "retryable": true, "restart_scheduled": false}
		if state != "" {
			want["agent_update_state"] = string(state)
		}
		assert.Equal(t, want, m, "payload of state %q", state)
	}
}

func TestWriteStaleIgnoresOtherErrors(t *testing.T) {
	rec := httptest.NewRecorder()
	assert.False(t, WriteStale(rec, nil))
	assert.False(t, WriteStale(rec, os.ErrNotExist))
	var g Guard
	assert.False(t, g.WriteStale(rec, httptest.NewRequest("GET", "/", nil), os.ErrNotExist))
	// A nil *StaleError in an error (a typed nil) is no stale answer:
	// no panic, nothing written.
	var typedNil *StaleError
	assert.False(t, WriteStale(rec, typedNil))
	assert.False(t, WriteStale(rec, fmt.Errorf("wrapped: %w", typedNil)))
	assert.False(t, g.WriteStale(rec, httptest.NewRequest("GET", "/", nil), typedNil))
	assert.Equal(t, 200, rec.Code)
	assert.Zero(t, rec.Body.Len())
}

// A hand-written handler may have no request at hand: no panic, and the
// plain JSON form.
func TestGuardWriteStaleWithoutRequest(t *testing.T) {
	g, err := New(Options{ProblemDetails: true})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	assert.False(t, g.WriteStale(rec, nil, nil))
	assert.False(t, g.WriteStale(rec, nil, os.ErrNotExist))
	assert.Zero(t, rec.Body.Len())
	require.True(t, g.WriteStale(rec, nil, sampleStale))
	assert.Equal(t, http.StatusConflict, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	golden(t, "stale-409.json", rec.Body.Bytes())
}

func TestWriteStaleProblemGolden(t *testing.T) {
	g, err := New(Options{ProblemDetails: true})
	require.NoError(t, err)
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Accept", "application/problem+json")
	rec := httptest.NewRecorder()
	require.True(t, g.WriteStale(rec, req, sampleStale))
	assert.Equal(t, http.StatusConflict, rec.Code)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	golden(t, "stale-409-problem.json", rec.Body.Bytes())
}

func TestPrefersProblem(t *testing.T) {
	cases := []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"application/json"}, false},
		{[]string{"*/*"}, false},
		{[]string{"application/problem+json"}, true},
		{[]string{"application/problem+json, application/json"}, false},
		{[]string{"application/json;q=0.5, application/problem+json"}, true},
		{[]string{"application/problem+json;q=0.9, application/json;q=0.8"}, true},
		{[]string{"application/problem+json;q=0.5, */*"}, false},
		{[]string{"application/problem+json;q=0"}, false},
		{[]string{"application/*;q=0.2", "application/problem+json"}, true},
		{[]string{"application/problem+json;q=2"}, false},
		{[]string{"application/problem+json;q=abc"}, false},
		{[]string{";;;, =, application/problem+json"}, true},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, prefersProblem(tc.accept), "prefersProblem(%q)", tc.accept)
	}
}

func TestStaleErrorText(t *testing.T) {
	assert.Equal(t, "runtimeguard: "+defaultMessage+
		" (loaded revision 1111111111111111111111111111111111111111, checkout now at 2222222222222222222222222222222222222222; update state unverified)",
		sampleStale.Error())
	unreadable := &StaleError{Message: "m", Captured: "abc", Err: os.ErrNotExist}
	assert.Equal(t, "runtimeguard: m (loaded revision abc, checkout now: file does not exist)", unreadable.Error())
	assert.Equal(t, "runtimeguard: the loaded runtime is stale (loaded revision none, checkout now has no revision)", (&StaleError{}).Error())
	assert.ErrorIs(t, unreadable, os.ErrNotExist)
	assert.ErrorIs(t, unreadable, ErrStale)
}

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
	gittest.WriteMarker(t, marker, os.Getpid(), time.Now())
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
	writeFile(t, filepath.Join(receiptsDir(h.home), "latest.json"), string(gittest.HermesReceipt(t, "gen2-no-id-success.json", h.moved, time.Now())))
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
	writeFile(t, filepath.Join(receiptsDir(h.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", h.moved, time.Now())))
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

// FuzzPayload: the payload of any message and state is valid JSON with
// exactly the contract's keys.
func FuzzPayload(f *testing.F) {
	f.Add("restart required", "unverified")
	f.Add("", "")
	f.Add("<script>\"\\\u2028", "incomplete")
	f.Add("\xff\xfe", "\x00")
	f.Fuzz(func(t *testing.T, message, state string) {
		body, err := json.Marshal((&StaleError{Message: message, State: UpdateState(state)}).Payload())
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("invalid JSON %s: %v", body, err)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := []string{"error", "restart_scheduled", "retryable", "type"}
		if state != "" {
			want = []string{"agent_update_state", "error", "restart_scheduled", "retryable", "type"}
		}
		if len(keys) != len(want) {
			t.Fatalf("keys %v, want %v", keys, want)
		}
		for i := range keys {
			if keys[i] != want[i] {
				t.Fatalf("keys %v, want %v", keys, want)
			}
		}
		if m["type"] != PayloadType || m["retryable"] != true || m["restart_scheduled"] != false {
			t.Fatalf("payload %s breaks the contract", body)
		}
	})
}

// FuzzPrefersProblem: the Accept parser never panics.
func FuzzPrefersProblem(f *testing.F) {
	f.Add("application/problem+json;q=0.9, application/json;q=0.8")
	f.Add("*/*;q=")
	f.Fuzz(func(t *testing.T, accept string) {
		_ = prefersProblem([]string{accept})
	})
}

// The problem document's type URI is the URL of a file of this repository
// on its main branch: the file exists, and it defines the payload (the
// type's own URL and the payload's type word are in it).
func TestProblemTypeResolvesToAFile(t *testing.T) {
	path, ok := strings.CutPrefix(ProblemType, "https://github.com/runtimeguard/runtimeguard/blob/main/")
	require.True(t, ok, "ProblemType %q is not the URL of a file of the repository", ProblemType)
	require.NotContains(t, path, "#", "ProblemType %q depends on an anchor", ProblemType)
	require.True(t, filepath.IsLocal(filepath.FromSlash(path)), "ProblemType %q leaves the repository", ProblemType)
	body, err := os.ReadFile(filepath.FromSlash(path))
	require.NoError(t, err, "ProblemType %q names no file of the repository", ProblemType)
	assert.Contains(t, string(body), ProblemType)
	assert.Contains(t, string(body), PayloadType)
	for _, key := range []string{`"error"`, `"type"`, `"retryable"`, `"restart_scheduled"`, `"agent_update_state"`} {
		assert.Contains(t, string(body), key)
	}
}

// The guard's middleware hands every stale answer to the OnStale hook, and
// says Retry-After while a reload is scheduled.
func TestMiddlewareHookAndRetryAfter(t *testing.T) {
	c := newReloadCase(t)
	var seen []*StaleError
	var err error
	c.g, err = New(Options{ModulePath: c.module, HomeDir: c.home, OnStale: func(r *http.Request, se *StaleError) {
		seen = append(seen, se)
	}})
	require.NoError(t, err)
	moved := commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 3\n")
	h := c.g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("a stale request reached the handler") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, http.StatusConflict, rec.Code)
	assert.Empty(t, rec.Header().Get("Retry-After"))
	require.Len(t, seen, 1)
	assert.Equal(t, moved, seen[0].Current)

	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", moved, time.Now())))
	plan, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer plan.Release()
	require.NoError(t, plan.Schedule())
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Len(t, seen, 2)
	assert.True(t, seen[1].RestartScheduled)
}

func TestMiddlewareNegotiatesProblemDetails(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	for _, problem := range []bool{false, true} {
		g, err := New(Options{ModulePath: module, HomeDir: dir, ProblemDetails: problem})
		require.NoError(t, err)
		calls := 0
		h := g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls++ }))
		serve := func(accept string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/api/chat/start", nil)
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			h.ServeHTTP(rec, req)
			return rec
		}
		assert.Equal(t, 200, serve("").Code)
		require.Equal(t, 1, calls)
		commit(t, dir, "run_agent.py", fmt.Sprintf("x = %v\n", problem))

		rec := serve("application/problem+json")
		assert.Equal(t, 409, rec.Code)
		var body map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		if problem {
			assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
			assert.Equal(t, ProblemType, body["type"])
			assert.Equal(t, float64(409), body["status"])
			assert.Equal(t, PayloadType, body["stale_type"])
			assert.Equal(t, true, body["retryable"])
			assert.Equal(t, false, body["restart_scheduled"])
		} else {
			assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			assert.Equal(t, PayloadType, body["type"])
		}
		// The body depends on Accept exactly where it is negotiated.
		if problem {
			assert.Equal(t, "Accept", rec.Header().Get("Vary"))
		} else {
			assert.Empty(t, rec.Header().Values("Vary"))
		}
		rec = serve("application/json")
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"), "the legacy body stays the default")
		assert.Equal(t, 1, calls, "a stale runtime reached the handler")
	}
}

func TestStaleErrorSaysWhyNoRevision(t *testing.T) {
	for _, tc := range noRevisionCases {
		for _, path := range []string{"watch or stat", "read"} {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				t.Parallel() // git and a guard on a repository of its own
				dir := tempDir(t)
				mod, rev := agentRepo(t, dir)
				g, err := New(Options{ModulePath: mod, Check: map[bool]string{true: "read"}[path == "read"]})
				require.NoError(t, err)
				require.NoError(t, g.EnsureCurrent())
				if tc.name == "untracked module" {
					// The bound module itself leaves the index.
					git(t, dir, "rm", "-q", "--cached", filepath.Base(mod))
				} else {
					tc.make(t, dir, mod)
				}
				for range 2 { // the read, then the answer kept
					err = g.EnsureCurrent()
					var se *StaleError
					require.ErrorAs(t, err, &se)
					assert.Equal(t, rev, se.Captured)
					assert.Empty(t, se.Current)
					require.Error(t, se.Err, "the stale answer carries why there is no revision")
					assert.ErrorIs(t, err, ErrNotCheckout)
					assert.Contains(t, se.Err.Error(), tc.reason)
					assert.Contains(t, err.Error(), tc.reason)
					assert.NotContains(t, err.Error(), "has no revision")
					p := se.Payload()
					assert.Equal(t, Payload{Error: se.Message, Type: PayloadType, Retryable: true, AgentUpdateState: se.State}, p, "the payload is unchanged")
				}
				assert.False(t, errors.Is(err, ErrReadTimeout))
			})
		}
	}
}
