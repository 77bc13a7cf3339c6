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
	found, srcErr, err := scanIndex(bytes.NewReader(data), bytes.NewReader(data), int64(len(data)), path, hashLen, *buf)
	if srcErr != nil {
		return false, srcErr
	}
	return found, err
}

// scanIndex reports whether the Git index that src gives, size bytes long,
// tracks path (slash separated, relative to the top level), compared byte
// for byte with each entry's name as ls-files matches it (as long as the
// entry's flags say, up to its first NUL): no pathspec magic. A path under
// a sparse directory entry is unsupported: git decides by the entry's
// tree. The index is checked whole, as git checks it when it reads one:
// header, every entry and the extensions. The trailing checksum is not verified, as git verifies it
// only in fsck (a checksum that does not match is read by every git
// command); hashLen is 40 (SHA-1) or 64 (SHA-256) hex digits.
//
// The index is read once, from its start to its end, through buf (at
// least indexMinBuf bytes): its entries one by one, each name compared
// with path as it goes by, never held whole (for version 4, whose names
// are prefix-compressed, what is kept of the previous name is how long it
// is, where its first NUL is and how much of path it matches). srcErr is a failure of src (a file
// that changed while it was read, say), which takes precedence over what
// the bytes read say: src is read to its end even where they fail; err is
// what is wrong with the index.
//
// at reads the same index at any offset: the tables git reads it in
// parallel with are read through it first (see indexTables); where at is
// nil, an index that holds them is refused.
func scanIndex(src io.Reader, at io.ReaderAt, size int64, path string, hashLen int, buf []byte) (found bool, srcErr, err error) {
	if len(buf) < indexMinBuf {
		buf = make([]byte, indexMinBuf)
	}
	s := indexStream{src: src, at: at, buf: buf}
	found, err = s.scan(size, path, hashLen)
	if srcErr = s.drain(); srcErr != nil {
		return false, srcErr, nil
	}
	return found, nil, err
}

// indexMinBuf is the least buffer scanIndex reads through: the fixed part
// of an entry, the largest read that must be whole, fits in it.
const indexMinBuf = 128

// errIndexTruncated is an index that ends, or its entries do, before the
// header says.
var errIndexTruncated = errors.New("index is truncated")

// indexStream is an index being read through a buffer: buf[r:w] is read
// and not yet parsed; pos is the offset in the index of buf[r], and size
// the index's size. Git reads the index from a map of the whole file, with
// no bound but the file's end: an entry may run into the trailing
// checksum, and the padding after the last entry past the file's end.
type indexStream struct {
	src       io.Reader
	at        io.ReaderAt
	buf       []byte
	r, w      int
	pos, size int64
	srcErr    error
}

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

// next returns the next n bytes of the index (n <= len(buf)), or nil when
// the file ends first (or src fails).
func (s *indexStream) next(n int) []byte {
	if s.pos+int64(n) > s.size || !s.fill(n) {
		return nil
	}
	b := s.buf[s.r : s.r+n]
	s.r += n
	s.pos += int64(n)
	return b
}

// skip passes over the next n bytes, which git does not read: past the
// file's end too, where nothing more may then be read. It reports false
// only when src fails.
func (s *indexStream) skip(n int64) bool {
	in := min(n, max(0, s.size-s.pos))
	for in > 0 {
		if s.r == s.w && !s.fill(1) {
			return false
		}
		k := min(int64(s.w-s.r), in)
		s.r += int(k)
		in -= k
	}
	s.pos += n
	return true
}

// indexName is what is kept of an entry's name: git's length of it (n),
// where the C string git also reads it as ends (cLen, the first NUL, or
// -1 while none is seen), and how much of the target that C string's
// start matched (match <= cLen).
type indexName struct {
	n, cLen, match int
}

// keep is the name's first k bytes (k <= n), the start of the next name
// in version 4.
func (p indexName) keep(k int) indexName {
	if p.cLen >= 0 && p.cLen < k {
		return indexName{n: k, cLen: p.cLen, match: p.match}
	}
	return indexName{n: k, cLen: -1, match: min(p.match, k)}
}

// add appends part to the name, comparing it with target.
func (p *indexName) add(part, target []byte) {
	if p.cLen < 0 {
		c := part
		nul := bytes.IndexByte(part, 0)
		if nul >= 0 {
			c = part[:nul]
		}
		if p.match == p.n && p.match < len(target) {
			p.match += commonPrefix(c, target[p.match:])
		}
		if nul >= 0 {
			p.cLen = p.n + nul
		}
	}
	p.n += len(part)
}

// take appends the next n bytes of the index to the name; false when the
// file ends first (or src fails).
func (s *indexStream) take(p *indexName, n int64, target []byte) bool {
	if s.pos+n > s.size {
		return false
	}
	for n > 0 {
		if s.r == s.w && !s.fill(1) {
			return false
		}
		k := min(int64(s.w-s.r), n)
		p.add(s.buf[s.r:s.r+int(k)], target)
		s.r += int(k)
		s.pos += k
		n -= k
	}
	return true
}

// untilNUL appends the bytes up to the next NUL, and the NUL, to the
// name; false when the file ends first (or src fails).
func (s *indexStream) untilNUL(p *indexName, target []byte) bool {
	for {
		if s.r == s.w && (s.pos >= s.size || !s.fill(1)) {
			return false
		}
		chunk := s.buf[s.r:s.w]
		if left := s.size - s.pos; int64(len(chunk)) > left {
			chunk = chunk[:left]
		}
		i := bytes.IndexByte(chunk, 0)
		if i >= 0 {
			chunk = chunk[:i+1]
		}
		p.add(chunk, target)
		s.r += len(chunk)
		s.pos += int64(len(chunk))
		if i >= 0 {
			return true
		}
		if s.pos >= s.size {
			return false
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

// Errors of entries git reads otherwise than the guard could follow.
var (
	errIndexThreads      = errors.New("index's tables for reading it in parallel (EOIE, IEOT) disagree with its entries: git reads them otherwise with index.threads")
	errIndexPrefix       = errors.New("index has a bad path prefix")
	errIndexUnterminated = errors.New("index entry's name, as long as its flags say, is not followed by a NUL: git reads it into memory past the entry")
	errIndexExtPastEnd   = errors.New("index extension that git reads runs past the end of the file")
)

// scan parses the index: see scanIndex. It follows do_read_index and
// create_from_disk of git's read-cache.c.
func (s *indexStream) scan(size int64, path string, hashLen int) (bool, error) {
	hashSize := int64(hashLen / 2)
	if size < indexHeaderBytes+hashSize {
		return false, errIndexTruncated
	}
	s.size = size
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
	var eoie int64
	var blocks []indexBlock
	if s.at != nil {
		var err error
		if eoie, blocks, err = indexTables(s.at, size, hashSize, count); err != nil {
			return false, err
		}
	}

	target := []byte(path)
	found := false
	var prev indexName // version 4: the previous entry's name
	for i := uint32(0); i < count; i++ {
		// Where a block of git's offset table starts, git reads the
		// entry from the block's offset, with no previous name.
		block := false
		for len(blocks) > 0 && blocks[0].first == i {
			if blocks[0].offset != s.pos {
				return false, errIndexThreads
			}
			block, blocks = true, blocks[1:]
		}
		fixed := indexStatBytes + int(hashSize) + 2
		e := s.next(fixed)
		if e == nil {
			return false, errIndexTruncated
		}
		mode := binary.BigEndian.Uint32(e[24:28])
		flags := binary.BigEndian.Uint16(e[indexStatBytes+hashSize:])
		if flags&indexExtended != 0 {
			// Read in every version, as git reads it.
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
		name := indexName{cLen: -1}
		if version == 4 {
			strip, ok := s.varint()
			if !ok {
				return false, errIndexTruncated
			}
			if i > 0 {
				// Git ignores the first entry's prefix: there is no
				// previous name.
				if strip > uint64(prev.n) {
					return false, errIndexPrefix
				}
				name = prev.keep(prev.n - int(strip))
				if block && name.n != 0 {
					return false, errIndexThreads
				}
			}
		}
		// Git takes the name's length from the flags, or up to its NUL
		// where they say 4095 or more, and copies the byte after it as
		// the name's end.
		copied := name.n
		if l := int(flags & indexNameMask); l != indexNameMask {
			if l+1 < copied {
				// Git copies more of the previous name than it
				// allocated.
				return false, errIndexPrefix
			}
			// Where l+1 == copied, the byte after the name is the
			// previous name's.
			if !s.take(&name, int64(l+1-copied), target) {
				return false, errIndexTruncated
			}
		} else if !s.untilNUL(&name, target) {
			return false, errIndexTruncated
		}
		name.n-- // the byte after the name
		if name.cLen < 0 {
			return false, fmt.Errorf("index entry %d: %w", i, errIndexUnterminated)
		}
		if version != 4 {
			// Entries are padded to a multiple of eight bytes, by
			// the length the flags give.
			if !s.skip(int64((fixed+name.n+8)&^7 - fixed - name.n - 1)) {
				return false, errIndexTruncated
			}
		}
		prev = name
		if !found {
			// The name, as a C string, is target's first cLen bytes
			// when it matched them all.
			prefix := name.match == name.cLen
			found = prefix && name.cLen == len(target)
			if mode == indexSparseDir && name.cLen > 0 && prefix && target[name.cLen-1] == '/' {
				// Whether git tracks a path under a sparse directory
				// entry depends on the entry's tree, which git expands
				// from the object store and this package does not read.
				return false, unsupportedf("%s is under the sparse directory entry %s of the index, whose tree this package does not read", target, target[:name.cLen])
			}
		}
	}
	if eoie != 0 && eoie != s.pos {
		return false, errIndexThreads
	}
	// Git reads extensions while 8 bytes are left before the checksum.
	for s.pos+8 <= size-hashSize {
		h := s.next(8)
		if h == nil {
			return false, errIndexTruncated
		}
		sig := string(h[:4])
		extSize := int64(binary.BigEndian.Uint32(h[4:8]))
		switch sig {
		case "link":
			return false, errSplitIndex
		case "EOIE", "IEOT":
			if s.at == nil {
				return false, errIndexThreads
			}
		case "sdir":
			// Not read here by git: a sparse index's mark (its
			// directory entries are matched above), and the tables
			// git reads entries in parallel with.
		case "TREE", "REUC", "UNTR", "FSMN":
			// Read by git, which ignores what it cannot parse but
			// reads up to the size given.
			if s.pos+extSize > size {
				return false, errIndexExtPastEnd
			}
		default:
			if sig[0] < 'A' || sig[0] > 'Z' {
				// Git skips an extension it does not know only when
				// its signature starts with a capital: any other is
				// required.
				return false, unsupportedf("index extension %q is required, and this package does not read it", sig)
			}
		}
		if !s.skip(extSize) {
			return false, errIndexTruncated
		}
	}
	return found, nil
}

// varint reads the offset encoding of index version 4 as git's
// decode_varint (varint.c) does, not LEB128: each continuation adds one
// before shifting. A value that overflows is 0, and its bytes are not
// consumed: git reads them as the name. ok is false when the file ends
// before the last byte.
func (s *indexStream) varint() (v uint64, ok bool) {
	n := int(min(16, s.size-s.pos))
	if n <= 0 || !s.fill(n) {
		return 0, false
	}
	v, used := indexVarint(s.buf[s.r : s.r+n])
	if used < 0 {
		return 0, false
	}
	s.r += used
	s.pos += int64(used)
	return v, true
}

// indexVarint decodes a varint of index version 4 at the start of b as
// git's decode_varint does: the value and the bytes it takes (0 where it
// overflows, and the value is 0), or used < 0 when b ends first.
func indexVarint(b []byte) (v uint64, used int) {
	for i, c := range b {
		if i > 0 {
			v++
			if v == 0 || v>>57 != 0 {
				return 0, 0
			}
			v = v<<7 | uint64(c&0x7f)
		} else {
			v = uint64(c & 0x7f)
		}
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	if len(b) > 0 && (v+1 == 0 || (v+1)>>57 != 0) {
		return 0, 0 // git stops before the byte after b
	}
	return 0, -1
}

// indexBlock is a block of an index's offset table (IEOT): git reads its
// entries from entry first on, starting at offset, the first with no
// previous name.
type indexBlock struct {
	first  uint32
	offset int64
}

// Bounds of the offset table: git writes a block a thread.
const (
	indexEOIEBytes  = 8 + 4 + 20 // header, offset, and hash of the extensions' headers
	indexMaxBlocks  = 1 << 16
	indexIEOTHeader = 4 // version
)

// indexTables reads, through at, the tables with which git reads an index
// in parallel where index.threads (and the cores) allow, as
// read_eoie_extension and read_ieot_extension in git's read-cache.c do:
// eoie, where the extensions start (0 where git would not take it), and
// the blocks of the offset table found from there (none where git would
// not read one). The EOIE hash over the extensions' headers is not
// checked: where it does not match git reads the index in order, as it is
// read here, and the tables are checked against that order all the same.
// A table git reads past the end of the file, that does not count the
// entries the header does, or that has more blocks than any git writes,
// is an error.
func indexTables(at io.ReaderAt, size, hashSize int64, count uint32) (eoie int64, blocks []indexBlock, err error) {
	end := size - hashSize - indexEOIEBytes // where EOIE is, when it is
	if end < indexHeaderBytes {
		return 0, nil, nil
	}
	var b [12]byte
	if _, err := at.ReadAt(b[:], end); err != nil {
		return 0, nil, err
	}
	if string(b[:4]) != "EOIE" || binary.BigEndian.Uint32(b[4:8]) != indexEOIEBytes-8 {
		return 0, nil, nil
	}
	eoie = int64(binary.BigEndian.Uint32(b[8:12]))
	if eoie < indexHeaderBytes || eoie >= end {
		return 0, nil, nil
	}
	// The extensions' headers from eoie on must lead to EOIE itself.
	var ieot, ieotSize int64 = -1, 0
	for off := eoie; off < end; {
		if _, err := at.ReadAt(b[:8], off); err != nil {
			return 0, nil, err
		}
		n := int64(binary.BigEndian.Uint32(b[4:8]))
		if string(b[:4]) == "IEOT" && ieot < 0 {
			ieot, ieotSize = off+8, n
		}
		off += 8 + n
		if off > end {
			return 0, nil, nil
		}
	}
	if ieot < 0 {
		return eoie, nil, nil
	}
	if ieot+indexIEOTHeader > size || ieotSize < indexIEOTHeader {
		return 0, nil, errIndexThreads
	}
	if _, err := at.ReadAt(b[:4], ieot); err != nil {
		return 0, nil, err
	}
	nr := (ieotSize - indexIEOTHeader) / 8
	if binary.BigEndian.Uint32(b[:4]) != 1 || nr == 0 {
		return eoie, nil, nil // git reads the entries in order
	}
	if nr > indexMaxBlocks || ieot+indexIEOTHeader+8*nr > size {
		return 0, nil, errIndexThreads
	}
	table := make([]byte, 8*nr)
	if _, err := at.ReadAt(table, ieot+indexIEOTHeader); err != nil {
		return 0, nil, err
	}
	var first uint64
	for i := int64(0); i < nr; i++ {
		n := binary.BigEndian.Uint32(table[8*i+4:])
		if n > 0 {
			blocks = append(blocks, indexBlock{first: uint32(first), offset: int64(binary.BigEndian.Uint32(table[8*i:]))})
		}
		first += uint64(n)
	}
	if first != uint64(count) {
		return 0, nil, errIndexThreads
	}
	return eoie, blocks, nil
}
