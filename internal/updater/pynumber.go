package updater

import (
	"math"
	"strconv"
	"strings"
	"unicode"
)

// pyIntMaxDigits is the most digits Python's int() converts by default
// (sys.int_info.default_max_str_digits, since Python 3.11 and in the 3.7 to
// 3.10 security releases): more, leading zeros counted, are a ValueError.
const pyIntMaxDigits = 4300

// pySigned is s made ASCII and stripped of surrounding whitespace
// ([pyASCII]), with an optional sign taken off.
func pySigned(s string) (t string, neg, ok bool) {
	t, ok = pyASCII(s)
	if ok && t != "" && (t[0] == '+' || t[0] == '-') {
		neg, t = t[0] == '-', t[1:]
	}
	return t, neg, ok
}

// pyInt parses s as Python 3's int(s) does for a str s: surrounding
// whitespace ([pyASCII]), an optional sign, and up to [pyIntMaxDigits]
// decimal digits (any Unicode decimal digit, category Nd) with single
// underscores between them; no base prefix. A value outside the int64 range
// is still valid: n is clamped to [math.MinInt64, math.MaxInt64].
func pyInt(s string) (n int64, ok bool) {
	t, neg, ok := pySigned(s)
	if !ok {
		return 0, false
	}
	digits, rest := pyDigitPart(t)
	if digits == "" || rest != "" || len(digits) > pyIntMaxDigits {
		return 0, false
	}
	var mag uint64
	for i := 0; i < len(digits); i++ {
		d := uint64(digits[i] - '0')
		if mag > (math.MaxUint64-d)/10 {
			mag = math.MaxUint64
			break
		}
		mag = mag*10 + d
	}
	switch {
	case !neg && mag > math.MaxInt64:
		return math.MaxInt64, true
	case !neg:
		return int64(mag), true
	case mag >= 1<<63:
		return math.MinInt64, true
	}
	return -int64(mag), true
}

// pyFloat parses s as Python 3's float(s) does for a str s: surrounding
// whitespace ([pyASCII]), an optional sign, then "inf", "infinity" or "nan" in any case,
// or a decimal number with an optional fraction and exponent whose digits
// (any Unicode decimal digit) may be separated by single underscores. Hex
// floats are not accepted. A value too large for a float64 is an infinity
// and a value too small a zero, as in Python, and not an error.
func pyFloat(s string) (f float64, ok bool) {
	t, neg, ok := pySigned(s)
	if !ok {
		return 0, false
	}
	sign := 1.0
	if neg {
		sign = -1
	}
	switch {
	case strings.EqualFold(t, "inf") || strings.EqualFold(t, "infinity"):
		return math.Inf(int(sign)), true
	case strings.EqualFold(t, "nan"):
		return math.Copysign(math.NaN(), sign), true
	}
	intPart, t := pyDigitPart(t)
	var fracPart string
	if t != "" && t[0] == '.' {
		fracPart, t = pyDigitPart(t[1:])
	}
	if intPart == "" && fracPart == "" {
		return 0, false
	}
	var exp int64
	if t != "" && (t[0] == 'e' || t[0] == 'E') {
		t = t[1:]
		expNeg := false
		if t != "" && (t[0] == '+' || t[0] == '-') {
			expNeg = t[0] == '-'
			t = t[1:]
		}
		var expDigits string
		expDigits, t = pyDigitPart(t)
		if expDigits == "" {
			return 0, false
		}
		// Saturate far beyond what the mantissa's digits can offset.
		for i := 0; i < len(expDigits) && exp < 1e17; i++ {
			exp = exp*10 + int64(expDigits[i]-'0')
		}
		if expNeg {
			exp = -exp
		}
	}
	if t != "" {
		return 0, false
	}
	// The value is 0.digits × 10^point.
	digits := strings.TrimLeft(intPart+fracPart, "0")
	leadingZeros := len(intPart) + len(fracPart) - len(digits)
	point := int64(len(intPart)-leadingZeros) + exp
	digits = strings.TrimRight(digits, "0")
	switch {
	case digits == "" || point < -400:
		return math.Copysign(0, sign), true
	case point > 400:
		return math.Inf(int(sign)), true
	}
	f, err := strconv.ParseFloat("0."+digits+"e"+strconv.FormatInt(point, 10), 64)
	if err != nil && !isRangeError(err) {
		return 0, false
	}
	return sign * f, true
}

// isRangeError reports whether err is strconv's out-of-range error, which
// ParseFloat returns with an infinity or a zero.
func isRangeError(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// pyDigitPart splits s after its leading run of ASCII digits in which single
// underscores may stand between two digits, and returns the digits without
// the underscores. An underscore that does not stand between two digits is
// left in rest.
func pyDigitPart(s string) (digits, rest string) {
	var b strings.Builder
	i := 0
	for i < len(s) {
		switch {
		case isASCIIDigit(s[i]):
			b.WriteByte(s[i])
			i++
		case s[i] == '_' && i > 0 && isASCIIDigit(s[i-1]) && i+1 < len(s) && isASCIIDigit(s[i+1]):
			i++
		default:
			return b.String(), s[i:]
		}
	}
	return b.String(), ""
}

// isASCIIDigit reports whether c is one of '0' to '9'.
func isASCIIDigit(c byte) bool { return '0' <= c && c <= '9' }

// pyASCII is the text Python's int() and float() parse for s: every
// character past ASCII that is whitespace becomes a space and every decimal
// digit its ASCII digit, and ASCII whitespace is then trimmed from both
// ends. Any other character past ASCII, or DEL, makes the text invalid: ok
// is false. Control characters below DEL stay as they are, so \x1c to \x1f,
// which str.isspace calls whitespace, are not trimmed, as in Python.
func pyASCII(s string) (t string, ok bool) {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x7f {
			ascii = false
			break
		}
	}
	if !ascii {
		var b strings.Builder
		for _, r := range s {
			switch {
			case r < 0x7f:
				b.WriteRune(r)
			case pyIsSpace(r):
				b.WriteByte(' ')
			default:
				d, isDigit := pyDecimal(r)
				if !isDigit {
					return "", false
				}
				b.WriteByte(byte('0' + d))
			}
		}
		s = b.String()
	}
	return strings.Trim(s, " \t\n\v\f\r"), true
}

// pyIsSpace reports whether r, past ASCII, is whitespace to Python's
// str.isspace: bidirectional class WS, B or S, or category Zs.
func pyIsSpace(r rune) bool {
	switch r {
	case 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return 0x2000 <= r && r <= 0x200a
}

// pyDecimal is the value of r if it is a Unicode decimal digit (category
// Nd). Such digits come in runs of ten, zero first, so the value is the
// distance from the start of r's run, modulo ten.
func pyDecimal(r rune) (d int, ok bool) {
	if !unicode.Is(unicode.Nd, r) {
		return 0, false
	}
	zero := r
	for unicode.Is(unicode.Nd, zero-1) {
		zero--
	}
	return int(r-zero) % 10, true
}
