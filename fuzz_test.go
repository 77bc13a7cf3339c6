package runtimeguard

import (
	"encoding/json"
	"sort"
	"testing"
)

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
