package updater

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pyNumberCases are inputs with what Python 3.11's int() and float() made
// of them: int is the value or "error" for a ValueError, float the repr or
// "error".
var pyNumberCases = []struct {
	name, in, int, float string
}{
	{"plain", "1700000000", "1700000000", "1700000000.0"},
	{"fraction", "1700000000.5", "error", "1700000000.5"},
	{"hex float", "0x1.ac34p+30", "error", "error"},
	{"hex float upper", "0X1P30", "error", "error"},
	{"hex int", "0x10", "error", "error"},
	{"octal prefix", "0o17", "error", "error"},
	{"binary prefix", "0b101", "error", "error"},
	{"leading zeros", "007", "7", "7.0"},
	{"leading zeros fraction", "00.50", "error", "0.5"},
	{"zero", "0", "0", "0.0"},
	{"negative zero", "-0", "0", "-0.0"},
	{"underscores", "1_700_000_000", "1700000000", "1700000000.0"},
	{"underscores fraction", "1_700_000_000.5", "error", "1700000000.5"},
	{"underscores in fraction", "0.000_5", "error", "0.0005"},
	{"underscore in exponent", "1e1_0", "error", "10000000000.0"},
	{"double underscore", "1__0", "error", "error"},
	{"leading underscore", "_1", "error", "error"},
	{"trailing underscore", "1_", "error", "error"},
	{"underscore before point", "1_.5", "error", "error"},
	{"underscore after point", "1._5", "error", "error"},
	{"underscore before exponent", "1_e5", "error", "error"},
	{"underscore after e", "1e_5", "error", "error"},
	{"underscore after sign", "+_1", "error", "error"},
	{"plus", "+42", "42", "42.0"},
	{"minus", "-42", "-42", "-42.0"},
	{"double sign", "--42", "error", "error"},
	{"sign then space", "- 42", "error", "error"},
	{"spaces", "  42  ", "42", "42.0"},
	{"tabs and cr", "\x0942\x0d", "42", "42.0"},
	{"vertical tab and form feed", "\x0b42\x0c", "42", "42.0"},
	{"newline inside", "4\x0a2", "error", "error"},
	{"space inside", "4 2", "error", "error"},
	{"file separator", "\x1c42", "error", "error"},
	{"unit separator after", "42\x1f", "error", "error"},
	{"nel", "\u008542", "42", "42.0"},
	{"no-break space", "\u00a042\u00a0", "42", "42.0"},
	{"ideographic space", "\u300042\u3000", "42", "42.0"},
	{"line separator", "42\u2028", "42", "42.0"},
	{"em space", "\u200342", "42", "42.0"},
	{"zero width space", "\u200b42", "error", "error"},
	{"mongolian vowel separator", "\u180e42", "error", "error"},
	{"byte order mark", "\ufeff42", "error", "error"},
	{"nul", "42\x00", "error", "error"},
	{"del", "42\x7f", "error", "error"},
	{"arabic-indic", "\u0664\u0662", "42", "42.0"},
	{"extended arabic-indic fraction", "\u06f1\u06f7.\u06f5", "error", "17.5"},
	{"fullwidth", "\uff11\uff17\uff10\uff10", "1700", "1700.0"},
	{"devanagari", "\u0967\u0968\u0969", "123", "123.0"},
	{"mathematical bold", "\U0001d7cf\U0001d7ce", "10", "10.0"},
	{"mixed scripts", "1\u0662\uff13", "123", "123.0"},
	{"unicode digits with underscore", "\u0661_\u0662", "12", "12.0"},
	{"fullwidth plus", "\uff0b1", "error", "error"},
	{"superscript two", "\u00b2", "error", "error"},
	{"roman numeral", "\u2167", "error", "error"},
	{"vulgar fraction", "\u00bd", "error", "error"},
	{"inf", "inf", "error", "inf"},
	{"Infinity", "Infinity", "error", "inf"},
	{"signed INF", "-INF", "error", "-inf"},
	{"iNfInItY", "+iNfInItY", "error", "inf"},
	{"infinit", "infinit", "error", "error"},
	{"infinityy", "infinityy", "error", "error"},
	{"nan", "nan", "error", "nan"},
	{"signed NaN", "-NaN", "error", "nan"},
	{"nan with payload", "nan(1)", "error", "error"},
	{"padded inf", "  inf\x09", "error", "inf"},
	{"inf with underscore", "in_f", "error", "error"},
	{"exponent", "1.7e9", "error", "1700000000.0"},
	{"upper exponent", "17E8", "error", "1700000000.0"},
	{"signed exponent", "1.7e+09", "error", "1700000000.0"},
	{"negative exponent", "17000000000e-1", "error", "1700000000.0"},
	{"exponent without digits", "1e", "error", "error"},
	{"exponent sign only", "1e+", "error", "error"},
	{"overflow", "1e400", "error", "inf"},
	{"negative overflow", "-1e400", "error", "-inf"},
	{"underflow", "1e-400", "error", "0.0"},
	{"huge exponent", "1e99999999999999999999", "error", "inf"},
	{"zero with huge exponent", "0e99999999999999999999", "error", "0.0"},
	{"max float", "1.7976931348623157e308", "error", "1.7976931348623157e+308"},
	{"just past max float", "1.7976931348623159e308", "error", "inf"},
	{"smallest denormal", "5e-324", "error", "5e-324"},
	{"below half the smallest denormal", "2e-324", "error", "0.0"},
	{"point only", ".", "error", "error"},
	{"leading point", ".5", "error", "0.5"},
	{"trailing point", "5.", "error", "5.0"},
	{"trailing point exponent", "5.e3", "error", "5000.0"},
	{"point exponent", ".e3", "error", "error"},
	{"two points", "1.2.3", "error", "error"},
	{"sign only", "-", "error", "error"},
	{"empty", "", "error", "error"},
	{"blank", "   ", "error", "error"},
	{"letters", "12a", "error", "error"},
	{"go duration", "1s", "error", "error"},
	{"comma", "1,5", "error", "error"},
	{"int64 max", "9223372036854775807", "9223372036854775807", "9.223372036854776e+18"},
	{"int64 max plus one", "9223372036854775808", "9223372036854775808", "9.223372036854776e+18"},
	{"int64 min", "-9223372036854775808", "-9223372036854775808", "-9.223372036854776e+18"},
	{"int64 min minus one", "-9223372036854775809", "-9223372036854775809", "-9.223372036854776e+18"},
	{"2^100", "1267650600228229401496703205376", "1267650600228229401496703205376", "1.2676506002282294e+30"},
	{"round half to even", "9007199254740993", "9007199254740993", "9007199254740992.0"},
	{"exponent with leading zeros", "1e0000000000000000000000000000005", "error", "100000.0"},
	{"400 digits", strings.Repeat("1", 400), strings.Repeat("1", 400), "inf"},
	{"4300 digits: the int() limit", strings.Repeat("1", 4300), strings.Repeat("1", 4300), "inf"},
	{"4301 digits", strings.Repeat("1", 4301), "error", "inf"},
	{"4301 digits, leading zeros count", strings.Repeat("0", 4300) + "1", "error", "1.0"},
	{"4301 digits with underscores", strings.Repeat("1_", 4300) + "1", "error", "inf"},
	{"round half up past 800 digits", "9007199254740993." + strings.Repeat("0", 900) + "1", "error", "9007199254740994.0"},
	{"exponent with leading zeros", "1e" + strings.Repeat("0", 30) + "5", "error", "100000.0"},
	{"many leading zeros then exponent", "0." + strings.Repeat("0", 20000) + "1e100000", "error", "inf"},
	{"many trailing zeros then exponent", "1" + strings.Repeat("0", 5000) + "e-5000", "error", "1.0"},
	{"long fraction", "0." + strings.Repeat("0", 5000) + "1e5010", "error", "1000000000.0"},
}

// pyInt and pyFloat give what Python gave for each case.
func TestPyIntPyFloat(t *testing.T) {
	for _, tc := range pyNumberCases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in[:min(len(tc.in), 40)]
			n, ok := pyInt(tc.in)
			wantN, wantOK := pyIntAnswer(t, tc.int)
			assert.Equal(t, wantOK, ok, "pyInt(%q) ok = %v, want %v", in, ok, wantOK)
			assert.Equal(t, wantN, n, "pyInt(%q) = %d, want %d (int() = %.40s)", in, n, wantN, tc.int)
			f, ok := pyFloat(tc.in)
			wantF, wantOK := pyFloatAnswer(t, tc.float)
			assert.Equal(t, wantOK, ok, "pyFloat(%q) ok = %v, want %v", in, ok, wantOK)
			assert.True(t, sameFloat(f, wantF), "pyFloat(%q) = %v, want %v (float() = %s)", in, f, wantF, tc.float)
		})
	}
}

// pyDecimal and pyIsSpace agree with Python's Unicode data, except for
// digits one Unicode version has and the other has not.
func TestPyUnicodeDataMatchesPython(t *testing.T) {
	o := startPyOracle(t)
	if o == nil {
		t.Skip("python3 is not on PATH")
	}
	for r, d := range o.digits {
		got, ok := pyDecimal(r)
		if !ok {
			require.True(t, o.skew[r], "pyDecimal(%U) is no digit, Python says %d", r, d)
			continue
		}
		assert.Equal(t, d, got, "pyDecimal(%U) = %d, want %d", r, got, d)
	}
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if _, ok := pyDecimal(r); ok && !o.skew[r] {
			_, want := o.digits[r]
			assert.True(t, want, "pyDecimal(%U) is a digit, Python says it is not", r)
		}
		assert.Equal(t, o.spaces[r], pyIsSpace(r), "pyIsSpace(%U)", r)
	}
	t.Logf("Python's Unicode %s; digits only one side knows: %d", o.version, len(o.skew))
}

// pyOracleScript answers, for each hex-encoded UTF-8 line it reads, the
// results of int() and float() as "INT FLOAT" (a repr, or "error" for a
// ValueError). It starts with its Unicode version and int() digit limit
// (0 where Python has none), its decimal digits as hex:value pairs, and
// its whitespace past ASCII.
const pyOracleScript = `
import sys, unicodedata
limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
print(unicodedata.unidata_version, limit)
print(" ".join("%x:%d" % (c, unicodedata.decimal(chr(c))) for c in range(sys.maxunicode + 1) if chr(c).isdecimal()))
print(" ".join("%x" % c for c in range(0x80, sys.maxunicode + 1) if chr(c).isspace()))
sys.stdout.flush()
def answer(f, s):
    try:
        v = f(s)
    except ValueError:
        return "error"
    return repr(v) if f is float else str(v)
for line in sys.stdin:
    s = bytes.fromhex(line).decode("utf-8")
    print(answer(int, s), answer(float, s), flush=True)
`

// pyOracle is one long-lived python3 child that answers what int() and
// float() make of a string.
type pyOracle struct {
	version  string
	intLimit int          // Python's int() digit limit, 0 for none
	digits   map[rune]int // Python's decimal digits and their values
	spaces   map[rune]bool
	skew     map[rune]bool // digits Go's or Python's Unicode data lacks

	mu  sync.Mutex // protects in and out, one question at a time
	in  io.WriteCloser
	out *bufio.Reader
}

// startPyOracle starts python3 in isolated mode (no PYTHON* variables, so
// the default int() limit holds) and reads its Unicode data. It returns nil
// where python3 is not on PATH; the child ends when the test does.
func startPyOracle(t testing.TB) *pyOracle {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		return nil
	}
	cmd := exec.Command(python, "-I", "-c", pyOracleScript)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("python3 oracle: %v", err)
		}
	})
	o := &pyOracle{in: in, out: bufio.NewReaderSize(out, 1<<16), digits: map[rune]int{}, spaces: map[rune]bool{}, skew: map[rune]bool{}}
	header := strings.Fields(o.line(t))
	require.Len(t, header, 2, "python3 oracle header")
	o.version = header[0]
	o.intLimit, err = strconv.Atoi(header[1])
	require.NoError(t, err)
	for _, pair := range strings.Fields(o.line(t)) {
		var r rune
		var d int
		_, err := fmt.Sscanf(pair, "%x:%d", &r, &d)
		require.NoError(t, err, "python3 oracle digit %q", pair)
		o.digits[r] = d
		if !unicode.Is(unicode.Nd, r) {
			o.skew[r] = true
		}
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if _, ok := o.digits[r]; !ok && unicode.Is(unicode.Nd, r) {
			o.skew[r] = true
		}
	}
	for _, h := range strings.Fields(o.line(t)) {
		r, err := strconv.ParseInt(h, 16, 32)
		require.NoError(t, err, "python3 oracle space %q", h)
		o.spaces[rune(r)] = true
	}
	return o
}

// line reads one line of the oracle's answer, without its newline.
func (o *pyOracle) line(t testing.TB) string {
	t.Helper()
	s, err := o.out.ReadString('\n')
	require.NoError(t, err, "reading the python3 oracle")
	return strings.TrimSuffix(s, "\n")
}

// ask returns Python's int() and float() answers for s, a UTF-8 string.
func (o *pyOracle) ask(t testing.TB, s string) (intAnswer, floatAnswer string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := io.WriteString(o.in, hex.EncodeToString([]byte(s))+"\n")
	require.NoError(t, err, "writing to the python3 oracle")
	intAnswer, floatAnswer, ok := strings.Cut(o.line(t), " ")
	require.True(t, ok, "python3 oracle answer for %q", s)
	return intAnswer, floatAnswer
}

// compare checks pyInt and pyFloat of s against Python's answers. Strings
// holding a digit only one Unicode version knows are not compared, nor int()
// of strings long enough to meet a digit limit Python does not share.
func (o *pyOracle) compare(t testing.TB, s string) {
	t.Helper()
	for _, r := range s {
		if o.skew[r] {
			return
		}
	}
	intAnswer, floatAnswer := o.ask(t, s)
	if o.intLimit == pyIntMaxDigits || len(s) <= pyIntMaxDigits {
		n, ok := pyInt(s)
		wantN, wantOK := pyIntAnswer(t, intAnswer)
		if n != wantN || ok != wantOK {
			t.Fatalf("pyInt(%q) = %d, %v, want %d, %v (int() = %.40s)", s, n, ok, wantN, wantOK, intAnswer)
		}
	}
	f, ok := pyFloat(s)
	wantF, wantOK := pyFloatAnswer(t, floatAnswer)
	if !sameFloat(f, wantF) || ok != wantOK {
		t.Fatalf("pyFloat(%q) = %v, %v, want %v, %v (float() = %s)", s, f, ok, wantF, wantOK, floatAnswer)
	}
}

// pyIntAnswer is what pyInt should return for Python's answer: the value
// clamped to int64, or not ok for "error".
func pyIntAnswer(t testing.TB, answer string) (int64, bool) {
	t.Helper()
	if answer == "error" {
		return 0, false
	}
	v, ok := new(big.Int).SetString(answer, 10)
	require.True(t, ok, "Python's int answer %.40q", answer)
	switch {
	case v.IsInt64():
		return v.Int64(), true
	case v.Sign() > 0:
		return math.MaxInt64, true
	}
	return math.MinInt64, true
}

// pyFloatAnswer is what pyFloat should return for Python's answer: the
// float a repr stands for, or not ok for "error".
func pyFloatAnswer(t testing.TB, answer string) (float64, bool) {
	t.Helper()
	if answer == "error" {
		return 0, false
	}
	f, err := strconv.ParseFloat(answer, 64)
	require.NoError(t, err, "Python's float answer %q", answer)
	return f, true
}

// sameFloat reports whether a and b are the same float: the same bits, or
// both NaN (Python and Go choose different NaN payloads).
func sameFloat(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Float64bits(a) == math.Float64bits(b)
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
