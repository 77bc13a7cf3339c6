package runtimeguard

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
