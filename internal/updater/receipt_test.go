package updater

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	shaA = "1111111111111111111111111111111111111111"
	shaB = "2222222222222222222222222222222222222222"
)

func TestParseReceipt(t *testing.T) {
	good := `{"schema": 1, "update_id": "u1", "outcome": "success",
		"started_at": "2026-11-30T05:00:00Z", "finished_at": "2026-11-30T05:01:02.5+00:00",
		"pre_update": {"sha": "` + shaA + `"}, "post_update": {"sha": "` + strings.ToUpper(shaB) + `", "branch": "main"},
		"extra": [1, {"nested": true}]}`
	r, err := ParseReceipt([]byte(good))
	require.NoError(t, err)
	assert.Equal(t, Receipt{
		UpdateID: "u1", Outcome: OutcomeSuccess,
		StartedAt:  time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC),
		FinishedAt: time.Date(2026, 11, 30, 5, 1, 2, 5e8, time.UTC),
		From:       shaA, To: shaB,
		ID: "update_id:u1",
	}, r)

	for _, outcome := range []string{"interrupted", "refused", "a-word-not-yet-known"} {
		newest, err := ParseReceipt([]byte(`{"schema":1,"outcome":"` + outcome + `","exit_code":130,"stop_reason":"interrupted by the user","started_at":"2026-11-30T05:00:00+00:00","finished_at":"2026-11-30T05:00:01.5+00:00","pre_update":{"sha":null},"post_update":{}}`))
		require.NoError(t, err, "the newest writer's receipt, outcome %q", outcome)
		assert.Equal(t, outcome, newest.Outcome)
	}

	naive, err := ParseReceipt([]byte(`{"schema":1,"update_id":"u","outcome":"running","started_at":"2026-11-30T05:00:00.123456"}`))
	require.NoError(t, err, "a running receipt has no finished_at; a time without offset is UTC")
	assert.Equal(t, time.Date(2026, 11, 30, 5, 0, 0, 123456000, time.UTC), naive.StartedAt)
	assert.True(t, naive.FinishedAt.IsZero())

	for _, tc := range []struct{ name, body, want string }{
		{"empty", ``, "not JSON"},
		{"not UTF-8", "{\"schema\":1,\"update_id\":\"\xff\"}", "not UTF-8"},
		{"array", `[1]`, "not a JSON object"},
		{"trailing data", `{"schema":1} {}`, "data after"},
		{"duplicate outcome", `{"schema":1,"update_id":"u","outcome":"failed","outcome":"success","started_at":"2026-11-30T05:00:00Z","finished_at":"2026-11-30T05:00:00Z"}`, `"outcome" appears twice`},
		{"a duplicate outcome in another case", `{"schema":1,"update_id":"u","outcome":"failed","OUTCOME":"success","started_at":"2026-11-30T05:00:00Z","finished_at":"2026-11-30T05:00:00Z"}`, `appears twice`},
		{"an outcome in another case alone", `{"schema":1,"update_id":"u","Outcome":"success","started_at":"2026-11-30T05:00:00Z","finished_at":"2026-11-30T05:00:00Z"}`, `is not "outcome"`},
		{"a long s for a duplicate schema", `{"schema":2,"ſchema":1}`, `appears twice`},
		{"duplicate nested sha", `{"schema":1,"post_update":{"sha":"` + shaA + `","sha":"` + shaB + `"}}`, `"sha" appears twice`},
		{"no schema", `{"update_id":"u"}`, "no schema"},
		{"schema a string", `{"schema":"1"}`, "not a receipt"},
		{"schema a fraction", `{"schema":1.5}`, "not a receipt"},
		{"empty outcome", `{"schema":1,"update_id":"u","outcome":"","started_at":"2026-11-30T05:00:00Z"}`, "an empty outcome"},
		{"outcome a number", `{"schema":1,"update_id":"u","outcome":1,"started_at":"2026-11-30T05:00:00Z"}`, "not a receipt"},
		{"no finished_at", `{"schema":1,"update_id":"u","outcome":"success","started_at":"2026-11-30T05:00:00Z"}`, "no finished_at"},
		{"bad time", `{"schema":1,"update_id":"u","outcome":"failed","started_at":"yesterday","finished_at":"2026-11-30T05:00:00Z"}`, "started_at"},
		{"short sha", `{"schema":1,"update_id":"u","outcome":"failed","started_at":"2026-11-30T05:00:00Z","finished_at":"2026-11-30T05:00:00Z","post_update":{"sha":"abc"}}`, "not a full hex"},
		{"sha a number", `{"schema":1,"update_id":"u","outcome":"failed","started_at":"2026-11-30T05:00:00Z","finished_at":"2026-11-30T05:00:00Z","post_update":{"sha":1}}`, "not a receipt"},
		{"deep", `{"schema":1,"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "nested deeper"},
		{"oversized", `{"schema":1,"x":"` + strings.Repeat("x", MaxReceiptBytes) + `"}`, "over"},
	} {
		_, err := ParseReceipt([]byte(tc.body))
		assert.ErrorContains(t, err, tc.want, "ParseReceipt(%s)", tc.name)
	}

	_, err = ParseReceipt([]byte(`{"schema": 2, "outcome": "whatever"}`))
	assert.ErrorIs(t, err, ErrUnknownSchema)
}

// FuzzParseReceipt: no input panics, and an accepted receipt is schema 1
// with an outcome (any word: a newer writer's too) and the times it needs:
// every outcome but "running" says when the run finished.
func FuzzParseReceipt(f *testing.F) {
	f.Add([]byte(`{"schema":1,"update_id":"u","outcome":"success","started_at":"2026-11-30T05:00:00Z","finished_at":"2026-11-30T05:00:01Z","pre_update":{"sha":"` + shaA + `"},"post_update":{"sha":"` + shaB + `"}}`))
	f.Add([]byte(`{"schema":1,"update_id":"u","outcome":"running","started_at":"2026-11-30T05:00:00"}`))
	f.Add([]byte(`{"schema":2}`))
	f.Add([]byte(`{"schema":1,"outcome":"failed","outcome":"success"}`))
	f.Add([]byte(`{"schema":1,"outcome":"0","started_at":"0000-01-10T0:00:00","finished_at":"0000-01-10T0:00:00"}`))
	f.Add([]byte(`{"schema":1,"update_id":"u","outcome":"success","started_at":"2026-11-30T05:00:00Z","finished_at":"2026-11-30T05:00:01Z","runtimeguard_checkout":"/srv/agent"}`))
	f.Add([]byte(`{"schema":1,"correlation_id":"c","outcome":"success","started_at":"2026-11-30T05:00:00Z","finished_at":"2026-11-30T05:00:01Z","runtimeguard_checkout":null,"RUNTIMEGUARD_CHECKOUT":"/x"}`))
	f.Add([]byte(`{"schema":1,"update_id":"u","outcome":"running","started_at":"2026-11-30T05:00:00Z","pid":1e3,"pid_create_time":"1.5","writer_pid":-4}`))
	f.Add([]byte(`{"schema":1,"update_id":"u","outcome":"running","started_at":"2026-11-30T05:00:00Z","pid":4294967296,"pid_create_time":1e400,"writer_pid":7}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseReceipt(data)
		if err != nil {
			return
		}
		for _, w := range []Identity{r.Writer, r.Persister} {
			if w.PID < 0 || w.PID > math.MaxUint32 || w.HasCreated && (math.IsInf(w.Created, 0) || math.IsNaN(w.Created)) || w.PID == 0 && w.HasCreated {
				t.Fatalf("accepted %q naming the writer %+v", data, w)
			}
		}
		var keys map[string]any
		if json.Unmarshal(data, &keys) == nil {
			if v, ok := keys[CheckoutKey].(string); ok && r.Checkout != v {
				t.Fatalf("accepted %q naming the checkout %q as %q", data, v, r.Checkout)
			}
			if v, ok := keys[CheckoutIDKey].(string); ok && r.CheckoutID != v {
				t.Fatalf("accepted %q naming the checkout's identity %q as %q", data, v, r.CheckoutID)
			}
		}
		if r.ID == "" || r.StartedAt.IsZero() {
			t.Fatalf("accepted %q as %+v", data, r)
		}
		switch {
		case r.Outcome == "":
			t.Fatalf("accepted %q without an outcome", data)
		case r.Outcome != OutcomeRunning && r.FinishedAt.IsZero():
			t.Fatalf("accepted %q, outcome %q, without finished_at", data, r.Outcome)
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

// Every generation's receipt parses, and is named by what it carries: an
// update_id, a correlation_id, or its own bytes.
func TestParseHermesReceipts(t *testing.T) {
	for _, tc := range []struct {
		name, outcome, idPrefix string
	}{
		{"gen1-update-id-success.json", OutcomeSuccess, "update_id:cbb7f64cc2e84a219879acf0c9b1f053"},
		{"gen1-update-id-failed.json", OutcomeFailed, "update_id:892b2b33b40a41409e16cc8e461bc9b0"},
		{"gen1-300-steps-success.json", OutcomeSuccess, "update_id:"},
		{"gen2-no-id-success.json", OutcomeSuccess, "sha256:"},
		{"gen3-correlation-success-latest.json", OutcomeSuccess, "correlation_id:corr-123"},
		{"gen3-correlation-success-retained.json", OutcomeSuccess, "correlation_id:corr-123"},
	} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "hermes-receipts", tc.name))
		require.NoError(t, err)
		r, err := ParseReceipt(data)
		require.NoError(t, err, "ParseReceipt(%s)", tc.name)
		assert.Equal(t, tc.outcome, r.Outcome, tc.name)
		assert.True(t, strings.HasPrefix(r.ID, tc.idPrefix), "ParseReceipt(%s).ID = %q, want prefix %q", tc.name, r.ID, tc.idPrefix)
		assert.Len(t, r.To, 40, tc.name)
		assert.False(t, r.FinishedAt.IsZero(), tc.name)
	}
	// A correlation_id of null is no identity; the bytes are.
	nullID := []byte(`{"schema":1,"correlation_id":null,"outcome":"success","started_at":"2026-12-01T08:13:40.356347+00:00","finished_at":"2026-12-01T08:13:40.393545+00:00","pre_update":{},"post_update":{"sha":null}}`)
	r, err := ParseReceipt(nullID)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(r.ID, "sha256:"), r.ID)
	assert.Empty(t, r.To, "a null sha names no revision")
}

// The duplicate-key check is linear: a receipt of the largest size made of
// short keys parses in well under a second (the quadratic check took
// seconds).
func TestParseReceiptManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"schema":1,"update_id":"u","outcome":"success","started_at":"2026-11-30T05:00:00Z","finished_at":"2026-11-30T05:00:01Z","x":{`)
	for i := 0; b.Len() < MaxReceiptBytes-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%x":0`, i)
	}
	b.WriteString(`}}`)
	start := time.Now()
	_, err := ParseReceipt([]byte(b.String()))
	require.NoError(t, err)
	t.Logf("%d bytes of short keys parsed in %v", b.Len(), time.Since(start))
	dup := strings.Replace(b.String(), `"1":0`, `"0":0`, 1)
	_, err = ParseReceipt([]byte(dup))
	assert.ErrorContains(t, err, "appears twice")
}
