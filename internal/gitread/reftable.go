package gitread

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// This file reads refs kept by Git's reftable backend
// (extensions.refStorage = reftable), as Git's reftable library reads
// them to resolve a ref: the format is described in Git's
// Documentation/technical/reftable.adoc.
//
// A repository's refs are a stack of tables in <dir>/reftable, listed
// oldest first in tables.list; a linked worktree has a stack of its own
// in its Git directory for HEAD and its other per-worktree refs, the main
// worktree keeps them in the common stack. A ref is looked up in every
// table of its stack as git looks it up (through the table's index when
// it has one, by the restart points of a block, record by record after
// that); the first record at or after the name in each table is decoded,
// and of those the smallest name wins, from the newest table on a tie. A
// deletion record that wins means the ref does not exist. Every table is
// checked as git checks it when it opens the stack (its header, its
// footer and the footer's CRC-32, the hash of the repository), and every
// record decoded as git decodes it: what git refuses is a read failure,
// never a guess. Log blocks are not read.
//
// Tables are immutable and named anew by each write; every change to a
// stack, compaction too, rewrites tables.list. A table that tables.list
// names and that is gone was compacted away while the stack was read:
// the stack is read again, as git reloads it, a bounded number of times.

const (
	maxTablesList     = 1 << 20 // tables.list
	maxTableBytes     = 1 << 30 // one table
	maxStackReads     = 5       // a stack compacted while read is read again
	maxIndexLevels    = 64      // an index deeper than this loops (git would hang)
	reftableHeaderV1  = 24
	reftableHeaderV2  = 28
	reftableFooterV1  = 68
	reftableFooterV2  = 72
	defaultBlockGuess = 4096 // git's DEFAULT_BLOCK_SIZE, the first read of a block
)

// Block types.
const (
	blockRef   = 'r'
	blockIndex = 'i'
	blockObj   = 'o'
	blockLog   = 'g'
	blockAny   = 0
)

// Ref record value types.
const (
	refDeletion = 0
	refVal1     = 1
	refVal2     = 2
	refSymref   = 3
)

// errReftable is a table git's reftable library refuses
// (REFTABLE_FORMAT_ERROR).
var errReftable = errors.New("not a reftable git can read")

// reftableError names the table and what is wrong with it.
func reftableError(path, why string) error {
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %s", errReftable, why)}
}

// rtTable is one opened table.
type rtTable struct {
	path       string
	data       []byte
	version    byte
	headerSize int
	blockSize  int
	hashSize   int
	size       int // the bytes before the footer
	refIndex   uint64
	refPresent bool
}

// rtStack is one stack of tables, oldest first.
type rtStack struct {
	dir    string
	tables []*rtTable
}

// readStack reads the stack in dir (a "reftable" directory) and opens each
// of its tables, recording tables.list and every table as dependencies. A
// table that is gone while tables.list, read again, names another list is
// a stack compacted meanwhile: it is read anew, as git reloads it.
func (r *reader) readStack(dir string, hashLen int) (*rtStack, error) {
	list := filepath.Join(dir, "tables.list")
	for try := 0; try < maxStackReads; try++ {
		mark := len(r.deps)
		names, err := r.readTablesList(list, true)
		if err != nil {
			return nil, err
		}
		st := &rtStack{dir: dir}
		missing := ""
		for _, name := range names {
			path := tablePath(dir, name)
			data, fst, err := r.fs.ReadFile(path, maxTableBytes, false)
			if err != nil {
				return nil, err
			}
			if !fst.Present() {
				missing = path
				break
			}
			if fst.IsDir() {
				return nil, &fs.PathError{Op: "read", Path: path, Err: errIsDir}
			}
			r.addDep(path, false, fst)
			t, err := openTable(path, data, hashLen)
			if err != nil {
				return nil, err
			}
			st.tables = append(st.tables, t)
		}
		if missing == "" {
			return st, nil
		}
		// git's reload: a listed table that does not exist is a
		// concurrent writer's doing only if tables.list now says
		// something else.
		r.deps = r.deps[:mark]
		scratch := reader{fs: r.fs}
		after, err := scratch.readTablesList(list, false)
		if err != nil {
			return nil, err
		}
		if equalStrings(after, names) {
			return nil, &fs.PathError{Op: "read", Path: list, Err: fmt.Errorf("names %s, which does not exist", missing)}
		}
	}
	return nil, &fs.PathError{Op: "read", Path: list, Err: fsread.ChangedError(fmt.Sprintf("rewritten %d times while its tables were read", maxStackReads))}
}

// readTablesList reads tables.list as git's parse_names does: one name a
// line, every line ending in a newline, empty lines skipped. A missing
// file is an empty stack. A name is any text: git opens <dir>/<name>, a
// name with slashes in a subdirectory or elsewhere (see tablePath).
func (r *reader) readTablesList(path string, record bool) ([]string, error) {
	data, st, err := r.fs.ReadFile(path, maxTablesList, false)
	if err != nil {
		return nil, err
	}
	if record {
		r.addDep(path, false, st)
	}
	switch {
	case !st.Present():
		return nil, nil
	case st.IsDir():
		return nil, &fs.PathError{Op: "read", Path: path, Err: errIsDir}
	}
	var names []string
	for len(data) > 0 {
		// git's strchr stops at a NUL as at the end of the buffer.
		eol := bytes.IndexByte(data, '\n')
		nul := bytes.IndexByte(data, 0)
		if eol < 0 || (nul >= 0 && nul < eol) {
			return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: a line without a newline", errReftable)}
		}
		if name := string(data[:eol]); name != "" {
			names = append(names, name)
		}
		data = data[eol+1:]
	}
	return names, nil
}

// tablePath is where git's stack_filename puts the table name of the stack
// in dir: dir, a slash and the name, not cleaned (a ".." after a link
// leads to the parent of its target, as for the kernel).
func tablePath(dir, name string) string {
	return dir + "/" + name
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// openTable checks a table as git's reftable_table_new and parse_footer
// do, and that its hash is the repository's (reftable_merged_table_new).
func openTable(path string, data []byte, hashLen int) (*rtTable, error) {
	if len(data) < reftableHeaderV2+1 {
		return nil, reftableError(path, "shorter than a header")
	}
	if string(data[:4]) != "REFT" {
		return nil, reftableError(path, "no REFT magic")
	}
	t := &rtTable{path: path, data: data, version: data[4]}
	footerSize := 0
	switch t.version {
	case 1:
		t.headerSize, footerSize = reftableHeaderV1, reftableFooterV1
	case 2:
		t.headerSize, footerSize = reftableHeaderV2, reftableFooterV2
	default:
		return nil, reftableError(path, fmt.Sprintf("version %d", t.version))
	}
	if len(data) < t.headerSize+footerSize {
		return nil, reftableError(path, "shorter than a header and a footer")
	}
	t.size = len(data) - footerSize
	footer := data[t.size:]
	if !bytes.Equal(footer[:t.headerSize], data[:t.headerSize]) {
		return nil, reftableError(path, "the footer does not repeat the header")
	}
	f := footer[5:]
	t.blockSize = int(be24(f))
	f = f[3+16:] // min and max update index
	hashSize := 20
	if t.version == 2 {
		switch binary.BigEndian.Uint32(f) {
		case 0x73686131: // "sha1"
		case 0x73323536: // "s256"
			hashSize = 32
		default:
			return nil, reftableError(path, "an unknown hash id")
		}
		f = f[4:]
	}
	t.hashSize = hashSize
	t.refIndex = binary.BigEndian.Uint64(f)
	objOffset := binary.BigEndian.Uint64(f[8:])
	f = f[40:]
	if crc32.ChecksumIEEE(footer[:len(footer)-len(f)]) != binary.BigEndian.Uint32(f) {
		return nil, reftableError(path, "the footer's CRC-32 does not match")
	}
	if objOffset>>5 > 0 && objOffset&31 == 0 {
		return nil, reftableError(path, "object blocks without an object id length")
	}
	t.refPresent = data[t.headerSize] == blockRef
	if hashSize*2 != hashLen {
		return nil, reftableError(path, fmt.Sprintf("%d-byte object ids in a repository of %d-digit ones", hashSize, hashLen))
	}
	return t, nil
}

func be24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

// rtBlock is one block of a table, as git's reftable_block_init reads it.
type rtBlock struct {
	data       []byte // from the block's start (the file's, for the first block)
	typ        byte
	headerOff  int
	restartOff int
	restarts   int
	fullSize   int // where the next block starts, from this one's start
}

// initBlock reads the block at off. ok is false where git's
// table_init_block returns "none": off past the last block, or a block
// of another type than want (unless want is blockAny).
func (t *rtTable) initBlock(off uint64, want byte) (b rtBlock, ok bool, err error) {
	if off >= uint64(t.size) {
		return b, false, nil
	}
	if off == 0 {
		b.headerOff = t.headerSize
	}
	guess := t.blockSize
	if guess == 0 {
		guess = defaultBlockGuess
	}
	read := func(n int) []byte { // git's read_block: clamped to the file
		end := uint64(len(t.data))
		if off+uint64(n) < end {
			end = off + uint64(n)
		}
		return t.data[off:end]
	}
	b.data = read(guess)
	if len(b.data) < b.headerOff+4 {
		return b, false, reftableError(t.path, fmt.Sprintf("a block at %d cut short", off))
	}
	b.typ = b.data[b.headerOff]
	switch b.typ {
	case blockRef, blockIndex, blockObj, blockLog:
	default:
		return b, false, reftableError(t.path, fmt.Sprintf("a block of unknown type %q at %d", b.typ, off))
	}
	if want != blockAny && b.typ != want {
		return b, false, nil
	}
	size := int(be24(b.data[b.headerOff+1:]))
	if size > guess {
		b.data = read(size)
	}
	if size < b.headerOff+4+2 {
		return b, false, reftableError(t.path, fmt.Sprintf("a block at %d of %d bytes", off, size))
	}
	if b.typ == blockLog {
		// Never needed to resolve a ref; where git would inflate one
		// on the way, it fails: a ref lookup never lands on a log block
		// in a table git reads.
		return b, false, reftableError(t.path, fmt.Sprintf("a ref lookup led to the log block at %d", off))
	}
	switch {
	case t.blockSize == 0:
		b.fullSize = size
	case size < t.blockSize && size < len(b.data) && b.data[size] != 0:
		b.fullSize = size // not padded: the next block follows at once
	default:
		b.fullSize = t.blockSize
	}
	if size > len(b.data) {
		return b, false, reftableError(t.path, fmt.Sprintf("a block at %d longer than the file", off))
	}
	b.data = b.data[:size]
	b.restarts = int(binary.BigEndian.Uint16(b.data[size-2:]))
	b.restartOff = size - 2 - 3*b.restarts
	if b.restartOff < b.headerOff+4 || b.restartOff > size-2 {
		return b, false, reftableError(t.path, fmt.Sprintf("a block at %d with %d restart points it has no room for", off, b.restarts))
	}
	if b.typ == blockRef || b.typ == blockIndex {
		if err := t.checkBlock(b, off); err != nil {
			return b, false, err
		}
	}
	return b, true, nil
}

// checkBlock decodes every record of a ref or index block, as git would
// one by one, and checks what git takes on trust when it searches the
// block: the records fill it to its restart table, their names ascend,
// and each restart point is the start of a record stored whole. A block
// that fails is a read failure: git reads such a block by whatever path
// its search takes, and may give another ref or crash.
func (t *rtTable) checkBlock(b rtBlock, off uint64) error {
	it := &rtIter{t: t}
	it.init(b, off)
	restart := 0
	var prev []byte
	for it.next < b.restartOff {
		start := it.next
		whole := false
		if restart < b.restarts && b.restart(restart) == start {
			restart++
			whole = true
		}
		prefix, _, _, _ := keyLen(b.data[start:b.restartOff])
		rec, ok, err := it.nextInBlock()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if whole && prefix != 0 {
			return reftableError(t.path, fmt.Sprintf("a restart point of the block at %d on a record stored prefix-compressed", off))
		}
		if prev != nil && bytes.Compare(rec.key, prev) <= 0 {
			return reftableError(t.path, fmt.Sprintf("names out of order in the block at %d", off))
		}
		prev = rec.key
	}
	if it.next != b.restartOff {
		return reftableError(t.path, fmt.Sprintf("records that run into the restart table of the block at %d", off))
	}
	if restart != b.restarts {
		return reftableError(t.path, fmt.Sprintf("a restart point of the block at %d that is not the start of a record", off))
	}
	return nil
}

func (b *rtBlock) restart(i int) int { return int(be24(b.data[b.restartOff+3*i:])) }

// varint is git's get_var_int; n is 0 where git returns -1.
func varint(in []byte) (v uint64, n int) {
	if len(in) == 0 {
		return 0, 0
	}
	c := in[0]
	n = 1
	v = uint64(c & 0x7f)
	for c&0x80 != 0 {
		v++
		if v == 0 || v>>(64-7) != 0 {
			return 0, 0
		}
		if n >= len(in) {
			return 0, 0
		}
		c = in[n]
		n++
		v = v<<7 + uint64(c&0x7f)
	}
	return v, n
}

// keyLen is git's reftable_decode_keylen.
func keyLen(in []byte) (prefix, suffix uint64, extra byte, n int) {
	prefix, a := varint(in)
	if a == 0 {
		return 0, 0, 0, 0
	}
	suffix, b := varint(in[a:])
	if b == 0 {
		return 0, 0, 0, 0
	}
	return prefix, suffix >> 3, byte(suffix & 7), a + b
}

// rtRecord is one decoded record: a ref, or an index entry.
type rtRecord struct {
	key     []byte
	valType byte
	value   []byte // the object id (val1, val2) or the symref target
	offset  uint64 // an index record's block offset
}

// rtIter walks the records of one block (git's block_iter).
type rtIter struct {
	t       *rtTable
	b       rtBlock
	off     uint64 // the block's offset in the table
	next    int
	lastKey []byte
	spare   []byte // the buffer the next key is decoded into
	done    bool   // the table is exhausted (table_iter's is_finished)
}

func (it *rtIter) init(b rtBlock, off uint64) {
	it.b, it.off, it.next, it.lastKey, it.done = b, off, b.headerOff+4, it.lastKey[:0], false
}

// nextInBlock is git's block_iter_next: ok is false at the restart table.
func (it *rtIter) nextInBlock() (rec rtRecord, ok bool, err error) {
	if it.next >= it.b.restartOff {
		return rec, false, nil
	}
	in := it.b.data[it.next:it.b.restartOff]
	bad := func(what string) error {
		return reftableError(it.t.path, fmt.Sprintf("%s in the block at %d", what, it.off))
	}
	prefix, suffix, extra, n := keyLen(in)
	if n == 0 {
		return rec, false, bad("a record key that does not decode")
	}
	in = in[n:]
	if uint64(len(in)) < suffix || prefix > uint64(len(it.lastKey)) {
		return rec, false, bad("a record key longer than its block or its predecessor")
	}
	// Two buffers in turn: the previous record's key stays as it was
	// while this one is decoded, and a block costs no allocation a key.
	key := append(append(it.spare[:0], it.lastKey[:prefix]...), in[:suffix]...)
	it.spare, it.lastKey = it.lastKey[:0], key
	in = in[suffix:]
	if len(key) == 0 {
		return rec, false, bad("an empty record key")
	}
	rec.key, rec.valType = key, extra
	used := 0
	switch it.b.typ {
	case blockRef:
		_, m := varint(in)
		if m == 0 {
			return rec, false, bad("a ref record's update index that does not decode")
		}
		used = m
		rest := in[m:]
		h := it.t.hashSize
		switch extra {
		case refDeletion:
		case refVal1:
			if len(rest) < h {
				return rec, false, bad("a ref record's object id cut short")
			}
			rec.value, used = rest[:h], used+h
		case refVal2:
			if len(rest) < 2*h {
				return rec, false, bad("a ref record's object ids cut short")
			}
			rec.value, used = rest[:h], used+2*h
		case refSymref:
			l, m2 := varint(rest)
			if m2 == 0 || uint64(len(rest)-m2) < l {
				return rec, false, bad("a symbolic ref's target cut short")
			}
			rec.value, used = rest[m2:m2+int(l)], used+m2+int(l)
		default:
			return rec, false, bad(fmt.Sprintf("a ref record of value type %d", extra))
		}
	case blockIndex:
		v, m := varint(in)
		if m == 0 {
			return rec, false, bad("an index record's offset that does not decode")
		}
		rec.offset, used = v, m
	default:
		// Object blocks are never iterated to resolve a ref.
		return rec, false, bad("an object block where refs or an index were sought")
	}
	it.next += n + int(suffix) + used
	return rec, true, nil
}

// firstKey is git's reftable_block_first_key.
func (b *rtBlock) firstKey(t *rtTable, off uint64) ([]byte, error) {
	in := b.data[b.headerOff+4 : b.restartOff]
	prefix, suffix, _, n := keyLen(in)
	if n == 0 || uint64(len(in)-n) < suffix || prefix > 0 || suffix == 0 {
		return nil, reftableError(t.path, fmt.Sprintf("the first key of the block at %d does not decode", off))
	}
	return in[n : n+int(suffix)], nil
}

// seekKey is git's block_iter_seek_key: a binary search over the restart
// points (git's binsearch, step by step, so that it looks at the restart
// points git looks at), then record by record to the last one before
// want.
func (it *rtIter) seekKey(want []byte) error {
	b := &it.b
	failed := false
	less := func(i int) bool { // restart_needle_less
		off := b.restart(i)
		if off >= b.restartOff {
			failed = true
			return false
		}
		in := b.data[off:b.restartOff]
		prefix, suffix, _, n := keyLen(in)
		if n == 0 || prefix != 0 || suffix > uint64(len(in)-n) {
			failed = true
			return false
		}
		key := in[n : n+int(suffix)]
		m := min(len(want), len(key))
		if c := bytes.Compare(want[:m], key[:m]); c != 0 {
			return c < 0
		}
		return len(want) < len(key)
	}
	i := 0
	if sz := b.restarts; sz > 0 {
		lo, hi := 0, sz
		for hi-lo > 1 && !failed {
			mid := lo + (hi-lo)/2
			if less(mid) {
				hi = mid
			} else {
				lo = mid
			}
		}
		switch {
		case failed:
		case lo != 0:
			i = hi
		case less(0):
			i = 0
		default:
			i = 1
		}
	}
	if failed {
		return reftableError(it.t.path, fmt.Sprintf("a restart point of the block at %d that is no record", it.off))
	}
	it.lastKey = it.lastKey[:0]
	if i > 0 {
		it.next = b.restart(i - 1)
	} else {
		it.next = b.headerOff + 4
	}
	for {
		prev := it.next
		rec, ok, err := it.nextInBlock()
		if err != nil {
			return err
		}
		if !ok {
			it.next = prev
			return nil
		}
		// git takes a ref record's key back from its name, a C string,
		// and goes on from that key.
		if it.b.typ == blockRef {
			it.lastKey = cString(rec.key)
		}
		if bytes.Compare(it.lastKey, want) >= 0 {
			it.next = prev
			return nil
		}
	}
}

// nextRecord is git's table_iter_next: the next record, in this block or
// in the next block of the same type. ok is false at the end.
func (it *rtIter) nextRecord() (rec rtRecord, ok bool, err error) {
	for {
		if it.done {
			return rec, false, nil
		}
		rec, ok, err := it.nextInBlock()
		if err != nil || ok {
			return rec, ok, err
		}
		off := it.off + uint64(it.b.fullSize)
		b, ok, err := it.t.initBlock(off, it.b.typ)
		if err != nil || !ok {
			it.done = true
			return rec, false, err
		}
		it.init(b, off)
	}
}

// seekTo is git's table_iter_seek_to: a block that must be there.
func (it *rtIter) seekTo(off uint64, want byte) error {
	b, ok, err := it.t.initBlock(off, want)
	if err != nil {
		return err
	}
	if !ok {
		return reftableError(it.t.path, fmt.Sprintf("no block of the type sought at %d", off))
	}
	it.init(b, off)
	return nil
}

// seekLinear is git's table_iter_seek_linear: from the current block, on
// through the blocks of its type while their first key is not past want,
// then within the block.
func (it *rtIter) seekLinear(want []byte) error {
	for {
		off := it.off + uint64(it.b.fullSize)
		b, ok, err := it.t.initBlock(off, it.b.typ)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		first, err := b.firstKey(it.t, off)
		if err != nil {
			return err
		}
		if bytes.Compare(first, want) > 0 {
			break
		}
		it.init(b, off)
	}
	it.init(it.b, it.off)
	return it.seekKey(want)
}

// seek positions a table's ref iterator before the first record at or
// after name, as git's table_iter_seek does. ok is false where the table
// has no record there to give.
func (t *rtTable) seek(name []byte) (it *rtIter, ok bool, err error) {
	it = &rtIter{t: t}
	if !t.refPresent {
		return it, false, nil
	}
	if t.refIndex == 0 {
		if err := it.seekTo(0, blockRef); err != nil {
			return it, false, err
		}
		return it, true, it.seekLinear(name)
	}
	if err := it.seekTo(t.refIndex, blockIndex); err != nil {
		return it, false, err
	}
	if err := it.seekLinear(name); err != nil {
		return it, false, err
	}
	for level := 0; ; level++ {
		if level == maxIndexLevels {
			return it, false, reftableError(t.path, fmt.Sprintf("an index more than %d levels deep", maxIndexLevels))
		}
		idx, ok, err := it.nextRecord()
		if err != nil || !ok {
			return it, false, err
		}
		b, ok, err := t.initBlock(idx.offset, blockAny)
		if err != nil {
			return it, false, err
		}
		if !ok {
			return it, false, reftableError(t.path, fmt.Sprintf("an index entry pointing past the blocks, to %d", idx.offset))
		}
		if b.typ != blockRef && b.typ != blockIndex {
			return it, false, reftableError(t.path, fmt.Sprintf("an index entry pointing to a block of type %q", b.typ))
		}
		it.init(b, idx.offset)
		if err := it.seekKey(name); err != nil {
			return it, false, err
		}
		if b.typ == blockRef {
			return it, true, nil
		}
	}
}

// lookup finds the ref name in the stack as git's reftable backend reads
// a ref (reftable_backend_read_ref over the merged tables): found is false
// for a ref that is not there or whose newest record is a deletion;
// otherwise it is a symbolic ref to symref or an object id.
func (s *rtStack) lookup(name string) (symref, oid string, found bool, err error) {
	want := []byte(name)
	type entry struct {
		it  *rtIter
		rec rtRecord
	}
	var entries []entry
	for _, t := range s.tables {
		it, ok, err := t.seek(want)
		if err != nil {
			return "", "", false, err
		}
		if !ok {
			continue
		}
		rec, ok, err := it.nextRecord()
		if err != nil {
			return "", "", false, err
		}
		if ok {
			rec.key = bytes.Clone(rec.key)
			entries = append(entries, entry{it, rec})
		}
	}
	if len(entries) == 0 {
		return "", "", false, nil
	}
	// git orders the records by their names, C strings.
	win := 0
	for i := range entries {
		if bytes.Compare(cString(entries[i].rec.key), cString(entries[win].rec.key)) <= 0 {
			win = i // the newest table wins a tie
		}
	}
	// git's merged iterator drops, and so advances past, the same name in
	// the older tables: a record there that does not decode fails it.
	for i := range entries {
		if i != win && bytes.Equal(cString(entries[i].rec.key), cString(entries[win].rec.key)) {
			if _, _, err := entries[i].it.nextRecord(); err != nil {
				return "", "", false, err
			}
		}
	}
	rec := entries[win].rec
	// git compares the record's name as a C string.
	if string(cString(rec.key)) != name || rec.valType == refDeletion {
		return "", "", false, nil
	}
	if rec.valType == refSymref {
		return string(cString(rec.value)), "", true, nil
	}
	return "", hex.EncodeToString(rec.value), true, nil
}

// hasRefs reports whether the stack holds a ref under refs/ whose newest
// record is not a deletion: see the files backend's hasRefs, whose use it
// shares (an unborn HEAD in a repository with other refs is transient).
// Every ref block of every table is read.
func (s *rtStack) hasRefs() (bool, error) {
	live := map[string]bool{}
	for _, t := range s.tables {
		if !t.refPresent {
			continue
		}
		it := &rtIter{t: t}
		if err := it.seekTo(0, blockRef); err != nil {
			return false, err
		}
		for {
			rec, ok, err := it.nextRecord()
			if err != nil {
				return false, err
			}
			if !ok {
				break
			}
			if name := string(cString(rec.key)); strings.HasPrefix(name, "refs/") {
				live[name] = rec.valType != refDeletion
			}
		}
	}
	for _, l := range live {
		if l {
			return true, nil
		}
	}
	return false, nil
}

// reftableStacks opens the stacks a checkout's refs are in: the common
// directory's, and for a linked worktree its own (git opens both when it
// opens the ref store, so a table of either that it refuses fails every
// lookup).
func (r *reader) reftableStacks(c *Checkout, hashLen int) (common, worktree *rtStack, err error) {
	if common, err = r.readStack(filepath.Join(c.CommonDir, "reftable"), hashLen); err != nil {
		return nil, nil, err
	}
	worktree = common
	if c.GitDir != c.CommonDir {
		if worktree, err = r.readStack(filepath.Join(c.GitDir, "reftable"), hashLen); err != nil {
			return nil, nil, err
		}
	}
	return common, worktree, nil
}

// resolveHeadReftable follows HEAD through symbolic refs to an object id
// in a reftable repository, at most maxSymrefDepth refs deep, as
// resolveHead does for the files backend. HEAD missing from the stack is
// a read failure (git rev-parse HEAD fails); a branch found nowhere is
// unborn.
func (r *reader) resolveHeadReftable(c *Checkout, hashLen int) error {
	common, worktree, err := r.reftableStacks(c, hashLen)
	if err != nil {
		return err
	}
	r.stack = common
	name := "HEAD"
	for depth := 0; depth < maxSymrefDepth; depth++ {
		st := common
		if perWorktreeRef(name) {
			st = worktree
		}
		target, oid, found, err := st.lookup(name)
		if err != nil {
			return err
		}
		if !found {
			if name == "HEAD" {
				return &fs.PathError{Op: "read", Path: filepath.Join(st.dir, "tables.list"), Err: errors.New("HEAD is not in the reftable stack")}
			}
			return nil
		}
		if oid != "" {
			c.Revision = oid
			return nil
		}
		if !validRefName(target) {
			return &fs.PathError{Op: "read", Path: st.dir, Err: fmt.Errorf("%s: %q is not a valid ref name", name, target)}
		}
		if depth == 0 {
			c.Head = target
		}
		name = target
	}
	return fmt.Errorf("HEAD: symbolic refs nested deeper than %d", maxSymrefDepth)
}
