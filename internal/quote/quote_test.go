package quote

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Printable text is shown as it is; anything with a control character, a
// terminal escape, a reordering mark or invalid UTF-8 is quoted whole,
// on one line.
func TestText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"serving 0123456789ab", "serving 0123456789ab"},
		{"héllo wörld", "héllo wörld"},
		{"a\nb", `"a\nb"`},
		{"red \x1b[31mtext", `"red \x1b[31mtext"`},
		{"tab\there", `"tab\there"`},
		{"bidi \u202eevil", `"bidi \u202eevil"`},
		{"bad \xff byte", `"bad \xff byte"`},
		{"nul\x00", `"nul\x00"`},
	} {
		got := Text(tc.in)
		assert.Equal(t, tc.want, got, "Text(%q)", tc.in)
		assert.False(t, strings.ContainsAny(got, "\n\r\x00\x1b"), "Text(%q) = %q holds a control character", tc.in, got)
	}
}
