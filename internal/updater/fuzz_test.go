package updater

import (
	"strings"
	"testing"
	"unicode/utf8"
)

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
		pid, started, ok := ParseMarker(body)
		if !ok {
			return
		}
		if !utf8.Valid(body) || len(body) > MaxMarkerBytes {
			t.Fatalf("ParseMarker(%q) accepted a body that is not small UTF-8", body)
		}
		lines := strings.Split(string(body), "\n")
		if len(lines) < 2 {
			t.Fatalf("ParseMarker(%q) accepted one line", body)
		}
		n, _ := pyInt(lines[0])
		x, _ := pyFloat(lines[1])
		if pid != n || !sameFloat(started, x) {
			t.Fatalf("ParseMarker(%q) = %d, %v, want %d, %v", body, pid, started, n, x)
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
