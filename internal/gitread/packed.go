package gitread

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// packed-refs, read as git's packed backend reads it.

// packedEnds refuses a packed-refs whose last line is not terminated:
// git's packed backend refuses it too (a file grown with zeros, say).
func packedEnds(_, tail []byte, _ int64) error {
	if tail[len(tail)-1] != '\n' {
		return errors.New("the last line is not terminated")
	}
	return nil
}

// lookupPackedRef finds name in a packed-refs file as Git's packed backend
// does (packed-backend.c, Git 2.39), so that it finds what git finds, or
// fails where git dies: the header, when there is one, must start
// "# pack-refs with: " (git 2.50 and later need the space; a header
// without it, which earlier versions read, is refused as one they read
// differently); the last line must end in a newline and hold at
// least an object id, a separator and one byte; a file whose header does
// not say "sorted" has every record checked that way and is sorted by ref
// name; then the ref is found by git's binary search over the bytes. A ref
// that a file not declared sorted lists twice is an error: which of the
// two git's sort puts where is not defined. It returns an empty id when
// the ref is not there.
func lookupPackedRef(data []byte, name string, hashLen int) (string, error) {
	buf, sorted, err := packedRecords(data)
	if err != nil {
		return "", err
	}
	if len(buf) > 0 {
		last := recordStart(buf, len(buf)-1)
		if buf[len(buf)-1] != '\n' || len(buf)-last < hashLen+2 {
			return "", errPackedLine
		}
	}
	if !sorted {
		if buf, err = sortPackedRecords(buf, name, hashLen); err != nil {
			return "", err
		}
	}
	lo, hi := 0, len(buf)
	for lo != hi {
		mid := lo + (hi-lo)/2
		rec := lo + recordStart(buf[lo:], mid-lo)
		cmp, ok := cmpRecordToName(buf[rec:], name, hashLen)
		switch {
		case !ok:
			return "", errPackedLine
		case cmp < 0:
			lo = mid + recordEnd(buf[mid:hi], 0)
		case cmp > 0:
			hi = rec
		default:
			if len(buf)-rec < hashLen || !isObjectID(string(buf[rec:rec+hashLen]), hashLen) {
				return "", fmt.Errorf("the entry for %s does not hold a %d-digit object id", name, hashLen)
			}
			return strings.ToLower(string(buf[rec : rec+hashLen])), nil
		}
	}
	return "", nil
}

// errPackedTwice is a ref a packed-refs file not declared sorted lists
// twice: git sorts the records with the C library's qsort, stable in some
// versions and not in others, so which of the two it finds is not defined.
var errPackedTwice = errors.New("listed twice in a packed-refs file not declared sorted: which entry git reads is not defined")

// errPackedHeaderSpace is a header with no space after "with:": git
// before 2.50 reads the file, later versions die on it.
var errPackedHeaderSpace = fmt.Errorf("a header without a space after \"with:\", which git 2.50 and later refuse: %w", ErrGitsDisagree)

// errPackedLine is git's "unexpected line in packed-refs" and
// "unterminated line in packed-refs".
var errPackedLine = errors.New("an unexpected or unterminated line, which git refuses")

// packedRecords splits off the header of a packed-refs file and reports
// whether it says the records are sorted.
func packedRecords(data []byte) (records []byte, sorted bool, err error) {
	if len(data) == 0 || data[0] != '#' {
		return data, false, nil
	}
	eol := bytes.IndexByte(data, '\n')
	if eol < 0 {
		return nil, false, errPackedLine
	}
	traits, ok := bytes.CutPrefix(data[:eol], []byte("# pack-refs with:"))
	if !ok {
		return nil, false, errPackedLine
	}
	if !bytes.HasPrefix(traits, []byte(" ")) {
		return nil, false, errPackedHeaderSpace
	}
	// git splits the traits as a C string: they end at a NUL.
	if i := bytes.IndexByte(traits, 0); i >= 0 {
		traits = traits[:i]
	}
	for _, t := range bytes.Split(traits, []byte(" ")) {
		sorted = sorted || string(t) == "sorted"
	}
	return data[eol+1:], sorted, nil
}

// sortPackedRecords is git's sort_snapshot: every record (a line, and a
// peeled "^" line after it) must be at least an object id, a separator and
// one byte long; the records are put in the order of their ref names.
func sortPackedRecords(buf []byte, name string, hashLen int) ([]byte, error) {
	var recs [][]byte
	for pos := 0; pos < len(buf); {
		eol := bytes.IndexByte(buf[pos:], '\n')
		if eol < 0 || eol < hashLen+2 {
			return nil, errPackedLine
		}
		end := pos + eol + 1
		if end < len(buf) && buf[end] == '^' {
			peel := bytes.IndexByte(buf[end:], '\n')
			if peel < 0 {
				return nil, errPackedLine
			}
			end += peel + 1
		}
		recs = append(recs, buf[pos:end])
		pos = end
	}
	refName := func(rec []byte) []byte { return rec[hashLen+1 : bytes.IndexByte(rec, '\n')] }
	slices.SortStableFunc(recs, func(a, b []byte) int { return bytes.Compare(refName(a), refName(b)) })
	out := make([]byte, 0, len(buf))
	for i, rec := range recs {
		if i > 0 && string(refName(rec)) == name && string(refName(recs[i-1])) == name {
			return nil, fmt.Errorf("%s: %w", name, errPackedTwice)
		}
		out = append(out, rec...)
	}
	return out, nil
}

// recordStart is git's find_start_of_record: from p back to the start of
// the line, and past a peeled "^" line to the record it belongs to.
func recordStart(buf []byte, p int) int {
	for p > 0 && (buf[p-1] != '\n' || buf[p] == '^') {
		p--
	}
	return p
}

// recordEnd is git's find_end_of_record: the offset just past the record
// that holds p (a peeled line included).
func recordEnd(buf []byte, p int) int {
	for p++; p < len(buf) && (buf[p-1] != '\n' || buf[p] == '^'); p++ {
	}
	return p
}

// cmpRecordToName is git's cmp_record_to_refname: the record's ref name,
// after the object id and one separator byte, up to the newline, against
// name, bytewise. ok is false for a record too short to hold a name,
// where git would read past it.
func cmpRecordToName(rec []byte, name string, hashLen int) (cmp int, ok bool) {
	if len(rec) <= hashLen+1 {
		return 0, false
	}
	r := rec[hashLen+1:]
	for i := 0; ; i++ {
		if i >= len(r) {
			return 0, false
		}
		if r[i] == '\n' {
			if i < len(name) {
				return -1, true
			}
			return 0, true
		}
		if i >= len(name) {
			return 1, true
		}
		if r[i] != name[i] {
			if r[i] < name[i] {
				return -1, true
			}
			return 1, true
		}
	}
}
