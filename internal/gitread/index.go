package gitread

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// errSplitIndex is returned for an index written with core.splitIndex: its
// entries live partly in a shared index file, which is not read.
var errSplitIndex = fmt.Errorf("split index (core.splitIndex): %w", errors.ErrUnsupported)

// Index entry layout (Documentation/gitformat-index.txt): ctime, mtime,
// dev, ino, mode, uid, gid and size take 40 bytes, then the object id and
// 16 bits of flags.
const (
	indexStatBytes   = 40
	indexExtended    = 0x4000 // flags: an extended-flags word follows
	indexNameMask    = 0x0fff // flags: the name's length, or all ones for 4095 or more
	indexKnownExt    = 0x6000 // extended flags: intent to add, skip worktree
	indexSparseDir   = 0o040000
	indexHeaderBytes = 12
)

// indexBufBytes is the buffer an index is read through: an index of any
// size costs this much memory to read, not its size.
const indexBufBytes = 64 << 10

// indexBufs keeps the buffers of reads done, for the next.
var indexBufs = sync.Pool{New: func() any { b := make([]byte, indexBufBytes); return &b }}

// indexHasPath reports whether the Git index in data tracks path: see
// scanIndex.
func indexHasPath(data []byte, path string, hashLen int) (bool, error) {
	buf := indexBufs.Get().(*[]byte)
	defer indexBufs.Put(buf)
	found, srcErr, err := scanIndex(bytes.NewReader(data), int64(len(data)), path, hashLen, *buf)
	if srcErr != nil {
		return false, srcErr
	}
	return found, err
}

// scanIndex reports whether the Git index that src gives, size bytes long,
// tracks path (slash separated, relative to the top level), compared byte
// for byte: no pathspec magic. A path under a sparse directory entry is
// unsupported: git decides by the entry's tree. The index is checked
// whole, as git checks it when it reads one: header, every entry and the
// extensions. The trailing checksum is not verified, as git verifies it
// only in fsck (a checksum that does not match is read by every git
// command); hashLen is 40 (SHA-1) or 64 (SHA-256) hex digits.
//
// The index is read once, from its start to its end, through buf (at
// least indexMinBuf bytes): its entries one by one, each name compared
// with path as it goes by, never held whole (for version 4, whose names
// are prefix-compressed, what is kept of the previous name is how long it
// is and how much of path it matches). srcErr is a failure of src (a file
// that changed while it was read, say), which takes precedence over what
// the bytes read say: src is read to its end even where they fail; err is
// what is wrong with the index.
func scanIndex(src io.Reader, size int64, path string, hashLen int, buf []byte) (found bool, srcErr, err error) {
	if len(buf) < indexMinBuf {
		buf = make([]byte, indexMinBuf)
	}
	s := indexStream{src: src, buf: buf}
	found, err = s.scan(size, path, hashLen)
	if srcErr = s.drain(); srcErr != nil {
		return false, srcErr, nil
	}
	return found, nil, err
}

// indexMinBuf is the least buffer scanIndex reads through: the fixed part
// of an entry, the largest read that must be whole, fits in it.
const indexMinBuf = 128

// indexStream is an index being read through a buffer: buf[r:w] is read
// and not yet parsed; body is how many bytes of the index before its
// trailing checksum are not yet parsed.
type indexStream struct {
	src    io.Reader
	buf    []byte
	r, w   int
	body   int64
	srcErr error
}

// errIndexTruncated is an index that ends, or its entries do, before the
// header says.
var errIndexTruncated = errors.New("index is truncated")

// fill reads until buf holds n bytes not yet parsed (n <= len(buf)). It
// reports false when src fails or ends first.
func (s *indexStream) fill(n int) bool {
	if s.w-s.r >= n {
		return true
	}
	if s.srcErr != nil {
		return false
	}
	if s.r > 0 {
		s.w = copy(s.buf, s.buf[s.r:s.w])
		s.r = 0
	}
	for s.w < n {
		m, err := s.read(s.buf[s.w:])
		s.w += m
		if err != nil {
			if errors.Is(err, io.EOF) && s.w < n {
				err = fsread.ChangedError("the file shrank while it was read")
			}
			if s.w < n {
				s.srcErr = err
				return false
			}
			s.srcErr = err
		}
	}
	return true
}

// next returns the next n bytes of the body (n <= len(buf)), or nil when
// the body ends first (or src fails).
func (s *indexStream) next(n int) []byte {
	if int64(n) > s.body || !s.fill(n) {
		return nil
	}
	b := s.buf[s.r : s.r+n]
	s.r += n
	s.body -= int64(n)
	return b
}

// skip passes over the next n bytes of the body; false when the body ends
// first (or src fails).
func (s *indexStream) skip(n int64) bool {
	if n > s.body {
		return false
	}
	for n > 0 {
		if s.r == s.w && !s.fill(1) {
			return false
		}
		k := min(int64(s.w-s.r), n)
		s.r += int(k)
		s.body -= k
		n -= k
	}
	return true
}

// name reads a NUL-terminated name from the body, comparing it with
// target from offset at, where the name so far, at bytes long, matched
// target in its first *match bytes (*match <= at): it adds the name's
// length to at and what of target it matched to *match. ok is false when
// the body ends before the NUL.
func (s *indexStream) name(target []byte, at int, match *int) (end int, ok bool) {
	for {
		if s.r == s.w && (s.body == 0 || !s.fill(1)) {
			return at, false
		}
		chunk := s.buf[s.r:s.w]
		if int64(len(chunk)) > s.body {
			chunk = chunk[:s.body]
		}
		i := bytes.IndexByte(chunk, 0)
		part := chunk
		if i >= 0 {
			part = chunk[:i]
		}
		if *match == at {
			*match += commonPrefix(part, target[at:])
		}
		at += len(part)
		taken := len(part)
		if i >= 0 {
			taken++
		}
		s.r += taken
		s.body -= int64(taken)
		if i >= 0 {
			return at, true
		}
		if s.body == 0 {
			return at, false
		}
	}
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// read is one read of src into p (not empty): a reader that gives
// nothing, and no error, many times in a row fails with io.ErrNoProgress.
func (s *indexStream) read(p []byte) (int, error) {
	for i := 0; i < 100; i++ {
		if m, err := s.src.Read(p); m > 0 || err != nil {
			return m, err
		}
	}
	return 0, io.ErrNoProgress
}

// drain reads src to its end, so that a file that changed while it was
// read says so, and reports src's failure.
func (s *indexStream) drain() error {
	for s.srcErr == nil {
		if _, err := s.read(s.buf); err != nil {
			s.srcErr = err
		}
	}
	if errors.Is(s.srcErr, io.EOF) {
		return nil
	}
	return s.srcErr
}

// scan parses the index: see scanIndex.
func (s *indexStream) scan(size int64, path string, hashLen int) (bool, error) {
	hashSize := int64(hashLen / 2)
	if size < indexHeaderBytes+hashSize {
		return false, errIndexTruncated
	}
	s.body = size - hashSize
	head := s.next(indexHeaderBytes)
	if head == nil {
		return false, errIndexTruncated
	}
	if string(head[:4]) != "DIRC" {
		return false, errors.New("index has no DIRC signature")
	}
	version := binary.BigEndian.Uint32(head[4:8])
	if version < 2 || version > 4 {
		return false, fmt.Errorf("index version %d: %w", version, errors.ErrUnsupported)
	}
	count := binary.BigEndian.Uint32(head[8:12])

	target := []byte(path)
	found := false
	// Version 4: the previous entry's name was prevLen bytes long and
	// matched target in its first prevMatch.
	prevLen, prevMatch := 0, 0
	for i := uint32(0); i < count; i++ {
		fixed := indexStatBytes + int(hashSize) + 2
		e := s.next(fixed)
		if e == nil {
			return false, errIndexTruncated
		}
		mode := binary.BigEndian.Uint32(e[24:28])
		flags := binary.BigEndian.Uint16(e[indexStatBytes+hashSize:])
		if flags&indexExtended != 0 {
			if version < 3 {
				return false, errors.New("index version 2 entry has extended flags")
			}
			fixed += 2
			ext := s.next(2)
			if ext == nil {
				return false, errIndexTruncated
			}
			if x := binary.BigEndian.Uint16(ext); x&^indexKnownExt != 0 {
				// Git refuses an entry with an extended flag it does
				// not know.
				return false, fmt.Errorf("index entry %d has extended flags %#04x, of which git knows only %#04x", i, x, indexKnownExt)
			}
		}
		var nameLen, match int
		if version == 4 {
			strip, ok := s.varint()
			if !ok || strip > uint64(prevLen) {
				return false, errors.New("index has a bad path prefix")
			}
			kept := prevLen - int(strip)
			match = min(prevMatch, kept)
			if nameLen, ok = s.name(target, kept, &match); !ok {
				return false, errIndexTruncated
			}
			prevLen, prevMatch = nameLen, match
		} else {
			var ok bool
			if nameLen, ok = s.name(target, 0, &match); !ok {
				return false, errIndexTruncated
			}
			// Entries are padded with one to eight NULs to a multiple
			// of eight bytes.
			if !s.skip(int64((fixed+nameLen+8)&^7 - fixed - nameLen - 1)) {
				return false, errIndexTruncated
			}
		}
		if l := int(flags & indexNameMask); l != indexNameMask && l != nameLen {
			// Git takes the name's length, and with it the entry's
			// size, from the flags: it reads another name than the
			// one up to the NUL, or the rest of the index askew.
			return false, fmt.Errorf("index entry %d: its flags say its name is %d bytes long, and it is %d", i, l, nameLen)
		}
		if !found {
			// The name is target's first nameLen bytes when it matched
			// them all.
			prefix := match == nameLen
			found = prefix && nameLen == len(target)
			if mode == indexSparseDir && nameLen > 0 && prefix && target[nameLen-1] == '/' {
				// Whether git tracks a path under a sparse directory
				// entry depends on the entry's tree, which git expands
				// from the object store and this package does not read.
				return false, unsupportedf("%s is under the sparse directory entry %s of the index, whose tree this package does not read", target, target[:nameLen])
			}
		}
	}
	for s.body > 0 {
		h := s.next(8)
		if h == nil {
			return false, errors.New("index extension is truncated")
		}
		sig := string(h[:4])
		size := binary.BigEndian.Uint32(h[4:8])
		switch {
		case sig == "link":
			return false, errSplitIndex
		case sig == "sdir":
			// A sparse index: its directory entries are matched above.
		case sig[0] < 'A' || sig[0] > 'Z':
			// Git skips an extension it does not know only when its
			// signature starts with a capital: any other is required.
			return false, unsupportedf("index extension %q is required, and this package does not read it", sig)
		}
		if !s.skip(int64(size)) {
			return false, errors.New("index extension is truncated")
		}
	}
	return found, nil
}

// varint reads the offset encoding of index version 4 (varint.c in Git,
// not LEB128): each continuation adds one before shifting. ok is false
// when the body ends first or the value overflows.
func (s *indexStream) varint() (v uint64, ok bool) {
	for i := 0; ; i++ {
		b := s.next(1)
		if b == nil {
			return 0, false
		}
		c := b[0]
		if i > 0 {
			if v >= 1<<56 {
				return 0, false
			}
			v = (v+1)<<7 | uint64(c&0x7f)
		} else {
			v = uint64(c & 0x7f)
		}
		if c&0x80 == 0 {
			return v, true
		}
	}
}
