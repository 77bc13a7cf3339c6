package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// fixture is a running server bound to a real agent checkout.
type fixture struct {
	agent, home, state string
	srv                *Server
	http               *httptest.Server
}

func newFixture(t *testing.T, gateway bool) *fixture {
	t.Helper()
	tmp := gittest.TempDir(t)
	f := &fixture{agent: filepath.Join(tmp, "agent"), home: filepath.Join(tmp, "home"), state: filepath.Join(tmp, "sessions.json")}
	require.NoError(t, os.MkdirAll(f.home, 0o755))
	module, _ := gittest.Agent(t, f.agent)
	guard, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: f.home})
	require.NoError(t, err)
	f.srv = NewServer(guard, f.state, gateway)
	f.http = httptest.NewServer(f.srv.Handler())
	t.Cleanup(f.http.Close)
	return f
}

// update moves the checkout as an updater would.
func (f *fixture) update(t *testing.T) {
	t.Helper()
	gittest.Commit(t, f.agent, "run_agent.py", "class AIAgent: updated = True\n")
}

func (f *fixture) post(t *testing.T, path string, body any) (int, map[string]any) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(f.http.URL+path, "application/json", bytes.NewReader(data))
	require.NoError(t, err)
	return decode(t, resp)
}

func (f *fixture) get(t *testing.T, path string) (int, map[string]any, []byte) {
	t.Helper()
	resp, err := http.Get(f.http.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	return resp.StatusCode, m, raw
}

func decode(t *testing.T, resp *http.Response) (int, map[string]any) {
	t.Helper()
	defer resp.Body.Close()
	var m map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	return resp.StatusCode, m
}

func (f *fixture) sessionBytes(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(f.state)
	require.NoError(t, err)
	return data
}

func assertStalePayload(t *testing.T, m map[string]any, state string) {
	t.Helper()
	assert.Equal(t, "agent_runtime_stale", m["type"])
	assert.Equal(t, true, m["retryable"])
	assert.Equal(t, false, m["restart_scheduled"])
	assert.Equal(t, state, m["agent_update_state"])
	assert.Contains(t, m["error"], "Restart Hermes WebUI manually")
	assert.NotContains(t, strings.ToLower(m["error"].(string)), "success")
}

func TestChatStartRefusesStaleRuntimeBeforeSessionState(t *testing.T) {
	f := newFixture(t, false)
	code, m := f.post(t, "/api/chat/start", map[string]string{"session_id": "s1", "message": "hello"})
	require.Equal(t, 200, code, m)
	before := f.sessionBytes(t)

	f.update(t)
	for _, sid := range []string{"s1", "new-session"} {
		code, m = f.post(t, "/api/chat/start", map[string]string{"session_id": sid, "message": "after update"})
		assert.Equal(t, 409, code)
		assertStalePayload(t, m, "unverified")
	}
	assert.Equal(t, before, f.sessionBytes(t), "a stale runtime changed the session file")

	// The server lives on and keeps answering: nothing restarted it.
	code, _ = f.post(t, "/api/chat/start", map[string]string{"session_id": "s1", "message": "again"})
	assert.Equal(t, 409, code)
}

func TestGatewayOwnedTurnsSkipTheCheckBackgroundTurnsDoNot(t *testing.T) {
	f := newFixture(t, true)
	f.update(t)
	code, m := f.post(t, "/api/chat/start", map[string]string{"session_id": "g1", "message": "via gateway"})
	require.Equal(t, 200, code, m)
	assert.Equal(t, "gateway", m["owner"])
	before := f.sessionBytes(t)

	code, m = f.post(t, "/api/chat/background", map[string]string{"session_id": "g1", "message": "hidden turn"})
	assert.Equal(t, 409, code, "a background turn this process runs is checked in gateway mode too")
	assertStalePayload(t, m, "unverified")
	assert.Equal(t, before, f.sessionBytes(t))
}

func TestOwnershipIsDecidedOncePerRequest(t *testing.T) {
	f := newFixture(t, false)
	for i, gateway := range []bool{false, true, false} {
		f.srv.SetGateway(gateway)
		before := f.srv.ownerRead.Load()
		code, m := f.post(t, "/api/chat/start", map[string]string{"session_id": "o", "message": "m"})
		require.Equal(t, 200, code, m)
		assert.Equal(t, before+1, f.srv.ownerRead.Load(), "request %d decided ownership more than once", i)
	}
}

func TestCompressionJobKeepsStaleResult(t *testing.T) {
	f := newFixture(t, false)
	for _, msg := range []string{"a", "b", "c", "d"} {
		code, _ := f.post(t, "/api/chat/start", map[string]string{"session_id": "c1", "message": msg})
		require.Equal(t, 200, code)
	}
	before := f.sessionBytes(t)
	f.update(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.agent, runtimeguard.HermesLayout.RecoveryMarkers[0]), nil, 0o644))

	code, m := f.post(t, "/api/session/compress?session_id=c1", nil)
	require.Equal(t, http.StatusAccepted, code, m)
	f.srv.Wait()

	var first []byte
	for i := 0; i < 2; i++ {
		code, m, raw := f.get(t, "/api/session/compress/status?session_id=c1")
		require.Equal(t, 200, code)
		assert.Equal(t, "error", m["status"])
		assert.Equal(t, float64(409), m["error_status"])
		assertStalePayload(t, m, "incomplete")
		if first == nil {
			first = raw
		} else {
			assert.Equal(t, string(first), string(raw), "the status changed between reads")
		}
	}
	assert.Equal(t, before, f.sessionBytes(t))
}

func TestCompressionJobCompressesWhenCurrent(t *testing.T) {
	f := newFixture(t, false)
	for _, msg := range []string{"a", "b", "c", "d"} {
		code, _ := f.post(t, "/api/chat/start", map[string]string{"session_id": "c2", "message": msg})
		require.Equal(t, 200, code)
	}
	code, _ := f.post(t, "/api/session/compress?session_id=c2", nil)
	require.Equal(t, http.StatusAccepted, code)
	f.srv.Wait()
	code, m, _ := f.get(t, "/api/session/compress/status?session_id=c2")
	require.Equal(t, 200, code)
	assert.Equal(t, "done", m["status"])
	assert.Equal(t, float64(3), m["messages"])
	code, _, _ = f.get(t, "/api/session/compress/status?session_id=unknown")
	assert.Equal(t, 404, code)
}
