// Package quote shows a string to a person on one line of plain text: a
// terminal, a log line, a service manager's status line. What it quotes
// forges no line and sends no escape sequence.
package quote

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Text is s as a line of plain text shows it: s itself when it is valid
// UTF-8 and every rune of it is printable, else s quoted as Go quotes a
// string (strconv.Quote), so that no control character (a newline, a
// terminal's escape sequence, a reordering mark) reaches the reader and
// no path or reason can forge a line of its own.
func Text(s string) string {
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
