package runtimeguard

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
	"unicode/utf8"
)

var markerStates = map[MarkerState]bool{MarkerAbsent: true, MarkerActive: true, MarkerStale: true, MarkerUnknown: true}

// FuzzParseMarker: the body parser never panics, and what it accepts is a
// positive process ID this platform can ask about and a finite time.
func FuzzParseMarker(f *testing.F) {
	f.Add([]byte("1234\n1700000000.5\n"))
	f.Add([]byte("1\n0\n"))
	f.Add([]byte("not-a-pid\nnot-a-time\n"))
	f.Add([]byte("\xff\xfe"))
	f.Add([]byte("1267650600228229401496703205376\n1\n"))
	f.Add([]byte("5\nnan\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		pid, started, ok := parseMarker(body)
		if !ok {
			return
		}
		if pid <= 0 || int64(pid) > maxPID {
			t.Fatalf("parseMarker(%q) accepted pid %d", body, pid)
		}
		if started != started || started > 1e308 || started < -1e308 {
			t.Fatalf("parseMarker(%q) accepted time %v", body, started)
		}
		if !utf8.Valid(body) || len(body) > MaxMarkerBytes {
			t.Fatalf("parseMarker(%q) accepted a body that is not small UTF-8", body)
		}
	})
}

// FuzzReadUpdateMarker: any bytes in a real marker file classify as one of
// the four words, the file is left as it was, and no process is asked about
// unless the body parsed.
func FuzzReadUpdateMarker(f *testing.F) {
	f.Add([]byte("1234\n1700000000\n"), int64(0))
	f.Add([]byte("1\n1\n"), int64(3600))
	f.Add([]byte(""), int64(0))
	f.Add([]byte("99999\n-1e9\n"), int64(-3600))
	dir := tempDir(f)
	f.Fuzz(func(t *testing.T, body []byte, offset int64) {
		path := filepath.Join(dir, "marker")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1700000000, 0).Add(time.Duration(offset) * time.Second)
		e := testEnv(func(pid int) procInfo {
			if _, _, ok := parseMarker(body); !ok {
				t.Fatalf("liveness asked for %d of an unparsable body %q", pid, body)
			}
			return procInfo{state: liveness(pid % 3)}
		})
		e.now = func() time.Time { return now }
		got := e.readMarker(path, DefaultMaxMarkerAge)
		if !markerStates[got] || got == MarkerAbsent {
			t.Fatalf("readMarker(%q) = %q", body, got)
		}
		after, err := os.ReadFile(path)
		if err != nil || string(after) != string(body) {
			t.Fatalf("the marker changed: %q -> %q (%v)", body, after, err)
		}
	})
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
