package runtimeguard

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var markerStates = map[MarkerState]bool{MarkerAbsent: true, MarkerActive: true, MarkerStale: true, MarkerUnknown: true}

// FuzzParseMarker: the body parser never panics, accepts only small UTF-8
// bodies of at least two lines, and reads the first two lines as pyInt and
// pyFloat read them.
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
		if !utf8.Valid(body) || len(body) > MaxMarkerBytes {
			t.Fatalf("parseMarker(%q) accepted a body that is not small UTF-8", body)
		}
		lines := strings.Split(string(body), "\n")
		if len(lines) < 2 {
			t.Fatalf("parseMarker(%q) accepted one line", body)
		}
		n, _ := pyInt(lines[0])
		x, _ := pyFloat(lines[1])
		if pid != n || !sameFloat(started, x) {
			t.Fatalf("parseMarker(%q) = %d, %v, want %d, %v", body, pid, started, n, x)
		}
	})
}

// numberAlphabet holds what matters to int() and float(). The fuzzer's
// bytes are also read as indexes into it, so that most inputs it tries are
// close to a number.
var numberAlphabet = []string{
	"0", "1", "5", "9", "_", ".", "e", "E", "+", "-", " ", "\t", "\n", "\x1c",
	"\u3000", "\u0085", "\u200b", "\u0661", "\uff19", "\U0001d7ce", "\u00b2",
	"i", "n", "f", "I", "N", "F", "a", "t", "y", "x", "p", "\x00",
}

// spell reads the bytes of s as indexes into numberAlphabet.
func spell(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteString(numberAlphabet[int(s[i])%len(numberAlphabet)])
	}
	return b.String()
}

// FuzzMarkerNumbers: pyInt and pyFloat never panic, agree with each other
// (what int() accepts float() accepts too, with the same value while it is
// exact) and ignore surrounding whitespace of either kind. Where python3 is
// on PATH, one child answers what int() and float() make of each input, and
// the answers must be the same. Each input is checked as it is and spelled
// in numberAlphabet.
func FuzzMarkerNumbers(f *testing.F) {
	for _, tc := range pyNumberCases {
		f.Add(tc.in)
	}
	oracle := startPyOracle(f)
	if oracle == nil {
		f.Log("python3 is not on PATH: checking invariants only")
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkNumber(t, oracle, s)
		checkNumber(t, oracle, spell(s))
	})
}

// checkNumber checks pyInt and pyFloat of s: the invariants, and Python's
// answers where oracle is not nil.
func checkNumber(t *testing.T, oracle *pyOracle, s string) {
	t.Helper()
	n, intOK := pyInt(s)
	x, floatOK := pyFloat(s)
	if intOK && !floatOK {
		t.Fatalf("pyInt(%q) = %d, but pyFloat rejects it", s, n)
	}
	if intOK && n > -1<<53 && n < 1<<53 && x != float64(n) {
		t.Fatalf("pyInt(%q) = %d, but pyFloat = %v", s, n, x)
	}
	for _, pad := range []string{" ", "\t\r", "\u3000", "\u0085"} {
		if n2, ok := pyInt(pad + s + pad); n2 != n || ok != intOK {
			t.Fatalf("pyInt(%q) = %d, %v, but pyInt(%q) = %d, %v", pad+s+pad, n2, ok, s, n, intOK)
		}
		if x2, ok := pyFloat(pad + s + pad); !sameFloat(x2, x) || ok != floatOK {
			t.Fatalf("pyFloat(%q) = %v, %v, but pyFloat(%q) = %v, %v", pad+s+pad, x2, ok, s, x, floatOK)
		}
	}
	if oracle != nil && utf8.ValidString(s) {
		oracle.compare(t, s)
	}
}

// FuzzReadUpdateMarker: any bytes in a real marker file classify as one of
// the four words, the file is left as it was, a marker over the age limit is
// stale whatever its process ID, and no process is asked about unless the
// body parsed, its time is within the age limit and its process ID is one
// this platform can ask about.
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
		nowSec := float64(now.UnixNano()) / 1e9
		parsedPID, started, parsed := parseMarker(body)
		e := testEnv(func(pid int) procInfo {
			switch {
			case !parsed:
				t.Fatalf("liveness asked for %d of an unparsable body %q", pid, body)
			case int64(pid) != parsedPID || pid <= 0 || int64(pid) > maxPID:
				t.Fatalf("liveness asked for %d of a body naming %d: %q", pid, parsedPID, body)
			case !(started <= nowSec && nowSec-started <= DefaultMaxMarkerAge.Seconds()):
				t.Fatalf("liveness asked for %d of a body whose time %v is not within the age limit", pid, started)
			}
			return procInfo{state: liveness(pid % 3)}
		})
		e.now = func() time.Time { return now }
		got := e.readMarker(path, DefaultMaxMarkerAge)
		if !markerStates[got] || got == MarkerAbsent {
			t.Fatalf("readMarker(%q) = %q", body, got)
		}
		if parsed && started <= nowSec && nowSec-started > DefaultMaxMarkerAge.Seconds() && got != MarkerStale {
			t.Fatalf("readMarker(%q) = %q, want %q: over age, whatever the process ID", body, got, MarkerStale)
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
