package gitread

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// This file reads Git's config file syntax the way Git's own parser does
// (config.c: git_parse_source, get_base_var, get_value, parse_value; the
// syntax is described in git-config(1), "CONFIGURATION FILE"), and decides
// from a repository's config whether this package can read the repository
// the way Git's setup does (setup.c: check_repo_format,
// verify_repository_format). Both follow Git 2.39; the differences are
// listed at parseRepoFormat.

// repoFormat is what a repository's config says about how to read it, as
// Git's setup takes it from that one file.
type repoFormat struct {
	objectFormat string // "sha1" or "sha256"
	hashLen      int    // hex digits in an object id
	// bare is core.bare when bareSet, and worktree is core.worktree when
	// worktreeSet; like Git, they are taken only from a config that states
	// format version 0 or 1. Git's later reading of core.bare from every
	// config file is not made here; config.worktree is read by the caller
	// (see worktreeConfig).
	worktreeKeys
	// worktreeConfig is extensions.worktreeConfig: git then takes
	// core.bare and core.worktree from the Git directory's config.worktree
	// too, and honours them even in a linked worktree.
	worktreeConfig bool
	// reftable is extensions.refStorage = reftable: refs are in reftable
	// stacks, not loose files and packed-refs.
	reftable bool
}

// worktreeKeys are core.bare and core.worktree, each with whether it was
// set.
type worktreeKeys struct {
	bare, bareSet bool
	worktree      string
	worktreeSet   bool
}

// take reads key when it is one of the two, as git does. folded is the
// value as git before 2.45 reads it (see [configScanner.value]): a path
// that the two read differently names two directories, and is refused.
func (w *worktreeKeys) take(key string, value, folded []byte, hasValue bool) error {
	switch key {
	case "core.bare":
		b, err := configBool(key, value, hasValue)
		if err != nil {
			return err
		}
		w.bare, w.bareSet = b, true
	case "core.worktree":
		if !hasValue {
			return errors.New("core.worktree has no value")
		}
		if !bytes.Equal(value, folded) {
			return gitsDisagree(key, value, folded)
		}
		w.worktree, w.worktreeSet = string(value), true
	}
	return nil
}

// worktreeOverrides reads core.bare and core.worktree from a
// config.worktree, as Git's read_worktree_config does, over what the
// repository's config said.
func (f *repoFormat) worktreeOverrides(config []byte) error {
	return walkGitConfig(config, func(key, value, folded []byte, hasValue bool) error {
		return f.take(string(key), value, folded, hasValue)
	})
}

// parseRepoFormat reads a repository's config and checks, as Git's setup
// does (check_repo_format, then verify_repository_format), that it states a
// format this package can read. The checks follow Git 2.39, entry by entry
// in file order, the last value of a key winning:
//
//   - core.repositoryformatversion is an integer as git_config_int reads
//     it; above 1 it is unsupported. Without it (or at -1) Git forgets
//     everything else the file said: the format is SHA-1 with files refs,
//     and extensions are not checked. Below -1 the extensions' values are
//     used but not checked.
//   - extensions.noop, preciousObjects, partialClone and worktreeConfig are
//     allowed in any version; objectFormat, noop-v1, compatObjectFormat,
//     refStorage, relativeWorktrees and submodulePathConfig only in
//     version 1; any other
//     extension is ignored in version 0 and unsupported in version 1.
//   - each value is checked where it appears, even when a later one
//     replaces it: a boolean must be one, and the object formats and the
//     ref storage need a value that names one.
//   - core.bare and core.worktree are recorded, see [repoFormat].
//
// Where it departs from Git 2.39: compatObjectFormat, refStorage,
// relativeWorktrees and submodulePathConfig are unknown to Git 2.39 (so
// unsupported in version 1, ignored in version 0); they are read here as
// later Git versions read them, so that a repository they made with the
// files backend is read (submodulePathConfig says where a superproject
// keeps its submodules' Git directories, nothing this package reads). An
// extensions.partialClone without a value, on which Git 2.39 crashes, is
// refused as later versions refuse it.
//
// What this package cannot read, a ref storage other than files and
// reftable (or one at another place, "files://..."), an object
// format other than SHA-1 and SHA-256, a version above 1 or an unknown
// extension, is an error that matches [errors.ErrUnsupported]; other
// errors mean the config is malformed.
func parseRepoFormat(config []byte) (repoFormat, error) {
	r := formatReader{version: -1, objectFormat: "sha1", refStorage: "files"}
	if err := walkGitConfig(config, r.entry); err != nil {
		return repoFormat{}, err
	}
	return r.format()
}

// formatReader collects what parseRepoFormat needs from the entries of a
// config, as Git's check_repo_format does.
type formatReader struct {
	version         int
	objectFormat    string
	refStorage      string
	compatSet       bool
	v1Only, unknown []string // extensions by name, in file order
	worktreeKeys
	worktreeConfig bool
}

// entry takes one config entry into account.
func (r *formatReader) entry(key, value, folded []byte, hasValue bool) error {
	if ext, ok := bytes.CutPrefix(key, []byte("extensions.")); ok {
		return r.extension(string(key), string(ext), value, hasValue)
	}
	switch string(key) {
	case "core.repositoryformatversion":
		v, ok := parseConfigInt(value)
		if !ok {
			return fmt.Errorf("bad numeric config value %q for core.repositoryformatversion", value)
		}
		r.version = v
	default:
		return r.take(string(key), value, folded, hasValue)
	}
	return nil
}

// extension takes extensions.<name> into account (key is the whole key).
func (r *formatReader) extension(key, name string, value []byte, hasValue bool) error {
	switch name {
	case "noop":
		return nil
	case "preciousobjects":
		_, err := configBool(key, value, hasValue)
		return err
	case "worktreeconfig":
		b, err := configBool(key, value, hasValue)
		r.worktreeConfig = b
		return err
	case "partialclone":
		if !hasValue {
			return fmt.Errorf("%s has no value", key)
		}
		return nil
	case "noop-v1":
	case "objectformat":
		if err := checkHashName(key, value, hasValue); err != nil {
			return err
		}
		r.objectFormat = string(value)
	case "compatobjectformat":
		if err := checkHashName(key, value, hasValue); err != nil {
			return err
		}
		if r.compatSet {
			return fmt.Errorf("%s is set twice", key)
		}
		r.compatSet = true
	case "refstorage":
		if !hasValue {
			return fmt.Errorf("%s has no value", key)
		}
		if backend, _, _ := strings.Cut(string(value), "://"); backend != "files" && backend != "reftable" {
			return unsupportedf("ref storage %q is not supported", value)
		}
		r.refStorage = string(value)
	case "relativeworktrees", "submodulepathconfig":
		if _, err := configBool(key, value, hasValue); err != nil {
			return err
		}
	default:
		r.unknown = append(r.unknown, name)
		return nil
	}
	r.v1Only = append(r.v1Only, name)
	return nil
}

// format decides, once every entry is read, as Git's read_repository_format
// and verify_repository_format do.
func (r *formatReader) format() (repoFormat, error) {
	f := repoFormat{objectFormat: "sha1", hashLen: 40}
	if r.version == -1 {
		return f, nil
	}
	if r.version >= 0 {
		switch {
		case r.version > 1:
			return f, unsupportedf("repository format version %d is not supported", r.version)
		case r.version == 1 && len(r.unknown) == 1:
			return f, unsupportedf("repository extension %q is not supported", r.unknown[0])
		case r.version == 1 && len(r.unknown) > 1:
			return f, unsupportedf("repository extensions %s are not supported", quotedList(r.unknown))
		case r.version == 0 && len(r.v1Only) > 0:
			return f, fmt.Errorf("repository format version 0 has the version 1 extensions %s", quotedList(r.v1Only))
		}
		f.worktreeKeys, f.worktreeConfig = r.worktreeKeys, r.worktreeConfig
	}
	switch r.refStorage {
	case "files":
	case "reftable":
		f.reftable = true
	default:
		return f, unsupportedf("ref storage %q is not supported: only the files backend (loose refs and packed-refs) and reftable are read", r.refStorage)
	}
	f.objectFormat, f.hashLen = r.objectFormat, hashLenOf(r.objectFormat)
	return f, nil
}

// checkHashName requires the value of key to name an object format.
func checkHashName(key string, value []byte, hasValue bool) error {
	switch {
	case !hasValue:
		return fmt.Errorf("%s has no value", key)
	case hashLenOf(string(value)) == 0:
		return unsupportedf("object format %q is not supported", value)
	}
	return nil
}

// hashLenOf returns the hex digits of an object id in the object format
// named (compared as Git's hash_algo_by_name does: case matters), or 0.
func hashLenOf(name string) int {
	switch name {
	case "sha1":
		return 40
	case "sha256":
		return 64
	}
	return 0
}

// quotedList quotes each name and joins them with commas.
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// ErrGitsDisagree is the class of what supported git versions read
// differently, refused rather than read as one of them: a config value
// (git before 2.45 folds each white space byte inside a value, a tab or a
// lone CR, into a blank, later versions keep it) where the answer depends
// on it (a path, which the two would take for different places), or a
// packed-refs header that later versions refuse.
var ErrGitsDisagree = errors.New("supported git versions read this differently")

// gitsDisagree is a failure of the ErrGitsDisagree class for key.
func gitsDisagree(key string, value, folded []byte) error {
	return fmt.Errorf("%s is %q to git 2.45 and later and %q to earlier versions: %w", key, value, folded, ErrGitsDisagree)
}

// unsupportedError is a repository format this package does not read.
type unsupportedError struct{ msg string }

// unsupportedf returns an [unsupportedError] with a formatted message.
func unsupportedf(format string, args ...any) error {
	return &unsupportedError{fmt.Sprintf(format, args...)}
}

// Error returns the message.
func (e *unsupportedError) Error() string { return e.msg }

// Unwrap makes the error match [errors.ErrUnsupported].
func (e *unsupportedError) Unwrap() error { return errors.ErrUnsupported }

// configBool reads a value as Git's git_config_bool does: no value is
// true, an empty one false, then true, yes, on, false, no and off in any
// case, then an integer (true unless zero). Anything else is an error, as
// it is fatal to Git.
func configBool(key string, value []byte, hasValue bool) (bool, error) {
	switch {
	case !hasValue:
		return true, nil
	case len(value) == 0:
		return false, nil
	}
	for _, word := range []string{"true", "yes", "on"} {
		if equalFoldASCII(value, word) {
			return true, nil
		}
	}
	for _, word := range []string{"false", "no", "off"} {
		if equalFoldASCII(value, word) {
			return false, nil
		}
	}
	if n, ok := parseConfigInt(value); ok {
		return n != 0, nil
	}
	return false, fmt.Errorf("bad boolean config value %q for %s", value, key)
}

// parseConfigInt reads an integer as Git's git_parse_int does: strtoimax
// with base 0 (leading white space, a sign, 0x for hexadecimal, a leading 0
// for octal), then an optional unit k, m or g in either case, the result
// from -(2^31-1) to 2^31-1. A value that is empty or has anything else is
// refused.
func parseConfigInt(value []byte) (int, bool) {
	const limit = 1<<31 - 1
	s := value
	for len(s) > 0 && (s[0] == ' ' || '\t' <= s[0] && s[0] <= '\r') {
		s = s[1:]
	}
	neg := false
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	base := uint64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && lowerASCII(s[1]) == 'x' && digitValue(s[2]) < 16:
		base, s = 16, s[2:]
	case len(s) > 0 && s[0] == '0':
		base = 8
	}
	n, digits := uint64(0), 0
	for ; digits < len(s) && digitValue(s[digits]) < base; digits++ {
		if n <= limit { // past the limit it is refused anyway; n cannot overflow
			n = n*base + digitValue(s[digits])
		}
	}
	if digits == 0 {
		return 0, false
	}
	factor := uint64(1)
	switch unit := s[digits:]; {
	case len(unit) == 0:
	case len(unit) == 1 && lowerASCII(unit[0]) == 'k':
		factor = 1 << 10
	case len(unit) == 1 && lowerASCII(unit[0]) == 'm':
		factor = 1 << 20
	case len(unit) == 1 && lowerASCII(unit[0]) == 'g':
		factor = 1 << 30
	default:
		return 0, false
	}
	if n > limit/factor {
		return 0, false
	}
	if neg {
		return -int(n * factor), true
	}
	return int(n * factor), true
}

// digitValue is the value of a hexadecimal digit, or 16 for any other
// byte.
func digitValue(c byte) uint64 {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0')
	case 'a' <= lowerASCII(c) && lowerASCII(c) <= 'f':
		return uint64(lowerASCII(c)-'a') + 10
	}
	return 16
}

// equalFoldASCII compares b and word ignoring ASCII case only, as C's
// strcasecmp does in the C locale.
func equalFoldASCII(b []byte, word string) bool {
	if len(b) != len(word) {
		return false
	}
	for i := range b {
		if lowerASCII(b[i]) != word[i] {
			return false
		}
	}
	return true
}

// walkGitConfig parses a config file and calls fn for each entry in file
// order, as Git calls a config callback: key and values are valid only
// during the call, and all end at a NUL byte, since Git hands them on as C
// strings. value is the value as git 2.45 and later read it, folded as
// earlier versions do. An error from fn stops the walk and is returned
// with the line of the entry.
func walkGitConfig(data []byte, fn func(key, value, folded []byte, hasValue bool) error) error {
	s := configScanner{data: data, line: 1}
	if len(data) > 0 && data[0] == utf8BOM[0] {
		if !bytes.HasPrefix(data, []byte(utf8BOM)) {
			return errors.New("config line 1: incomplete byte order mark")
		}
		s.pos = len(utf8BOM)
	}
	var key, value, folded []byte
	base := 0 // length of the section prefix of key, with its final "."
	comment := false
	for {
		line := s.line
		c := s.next()
		switch {
		case c == '\n':
			if s.eof {
				return nil
			}
			comment = false
			continue
		case comment || isConfigSpace(c):
			continue
		case c == '#' || c == ';':
			comment = true
			continue
		case c == '[':
			var ok bool
			if key, ok = s.sectionHeader(key[:0]); !ok || len(key) == 0 {
				return fmt.Errorf("config line %d: bad section header", line)
			}
			key = append(key, '.')
			base = len(key)
			continue
		case !isConfigAlpha(c):
			return fmt.Errorf("config line %d: %q cannot start a key", line, c)
		}
		key = append(key[:base], lowerASCII(c))
		for {
			c = s.next()
			if s.eof || !isConfigKeyChar(c) {
				break
			}
			key = append(key, lowerASCII(c))
		}
		for c == ' ' || c == '\t' {
			c = s.next()
		}
		value, folded = value[:0], folded[:0]
		hasValue := c != '\n'
		if hasValue {
			if c != '=' {
				return fmt.Errorf("config line %d: bad key name", line)
			}
			var err error
			if value, folded, err = s.value(value, folded); err != nil {
				return fmt.Errorf("config line %d: %w", line, err)
			}
		}
		if err := fn(cString(key), cString(value), cString(folded), hasValue); err != nil {
			return fmt.Errorf("config line %d: %w", line, err)
		}
	}
}

// utf8BOM is the byte order mark Git skips at the start of a config file.
const utf8BOM = "\xef\xbb\xbf"

// configScanner reads a config file a byte at a time, as Git's
// get_next_char does: CR LF reads as LF, and the end of the data reads as
// LF with eof set.
type configScanner struct {
	data []byte
	pos  int
	line int  // 1 + the line ends read
	eof  bool // the end was reached
}

// next returns the next byte, with CR LF read as LF and the end of the data
// as LF.
func (s *configScanner) next() byte {
	if s.pos >= len(s.data) {
		s.eof = true
		return '\n'
	}
	c := s.data[s.pos]
	s.pos++
	if c == '\r' && s.pos < len(s.data) && s.data[s.pos] == '\n' {
		s.pos++
		c = '\n'
	}
	if c == '\n' {
		s.line++
	}
	return c
}

// sectionHeader reads a section header after its "[" and appends the
// section to key: "section" in lower case for [section] and the legacy
// [section.subsection], "section.subsection" with the subsection as
// written for [section "subsection"]. ok is false for a malformed header.
func (s *configScanner) sectionHeader(key []byte) (_ []byte, ok bool) {
	for {
		c := s.next()
		switch {
		case s.eof:
			return key, false
		case c == ']':
			return key, true
		case isConfigSpace(c):
			return s.subsection(key, c)
		case !isConfigKeyChar(c) && c != '.':
			return key, false
		}
		key = append(key, lowerASCII(c))
	}
}

// subsection reads the rest of a [section "subsection"] header from the
// space c after the section name: more space, the quoted subsection, in
// which a backslash makes any byte but a line end literal, and "]" right
// after the closing quote.
func (s *configScanner) subsection(key []byte, c byte) (_ []byte, ok bool) {
	for {
		if c == '\n' {
			return key, false
		}
		if c = s.next(); !isConfigSpace(c) {
			break
		}
	}
	if c != '"' {
		return key, false
	}
	key = append(key, '.')
	for {
		c := s.next()
		if c == '\\' {
			c = s.next()
		} else if c == '"' {
			break
		}
		if c == '\n' {
			return key, false
		}
		key = append(key, c)
	}
	return key, s.next() == ']'
}

// value reads a value after its "=" to the end of its line, appending it
// to buf as git 2.45 and later read it, and to old as earlier versions
// do. Space around the value is dropped; space inside it, unless quoted,
// is kept byte for byte (buf), or becomes a blank per byte (old: a tab or
// a lone CR reads as a blank); a double quote starts or ends quoting; \n,
// \t, \b, \\ and \" are escapes and a backslash at a line end continues
// the value on the next line; # or ; outside quotes starts a comment.
func (s *configScanner) value(buf, old []byte) (_, _ []byte, err error) {
	quote, comment := false, false
	space := 0 // old: blanks seen after the value began, written before the next byte
	trim := -1 // buf: its length before a run of unquoted space at its end
	for {
		c := s.next()
		switch {
		case c == '\n':
			if quote {
				return nil, nil, errors.New("unterminated quote")
			}
			if trim >= 0 {
				buf = buf[:trim]
			}
			return buf, old, nil
		case comment:
			continue
		case isConfigSpace(c) && !quote:
			if len(old) > 0 {
				space++
			}
			if len(buf) > 0 {
				if trim < 0 {
					trim = len(buf)
				}
				buf = append(buf, c)
			}
			continue
		case !quote && (c == '#' || c == ';'):
			comment = true
			continue
		}
		trim = -1
		for ; space > 0; space-- {
			old = append(old, ' ')
		}
		switch c {
		case '\\':
			switch c = s.next(); c {
			case '\n':
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return nil, nil, fmt.Errorf("bad escape \\%q", c)
			}
		case '"':
			quote = !quote
			continue
		}
		buf, old = append(buf, c), append(old, c)
	}
}

// isConfigSpace is Git's isspace: space, tab, LF and CR, not VT or FF.
func isConfigSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// isConfigAlpha reports an ASCII letter.
func isConfigAlpha(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// isConfigKeyChar reports a byte Git allows in a key or section name after
// the first: an ASCII letter or digit, or "-".
func isConfigKeyChar(c byte) bool {
	return isConfigAlpha(c) || '0' <= c && c <= '9' || c == '-'
}

// lowerASCII lower-cases an ASCII letter and leaves other bytes alone.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// cString returns b up to its first NUL byte.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}
