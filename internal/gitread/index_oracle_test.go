package gitread

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzIndexStreamMatchesWhole: the streaming index parser, reading through
// a buffer of any size from a reader that gives any number of bytes at a
// time, answers as the whole-buffer parser does: the same answer, or the
// same error.
func FuzzIndexStreamMatchesWhole(f *testing.F) {
	long := strings.Repeat("d", 150)
	for _, seed := range indexSeeds(f) {
		for _, path := range []string{"run_agent.py", long + "/" + long + "/module_b.py", long + "/zz.py", "docs/more/deeper.txt", "src/keep.py"} {
			f.Add(seed, path, false, uint16(0), uint8(0))
			f.Add(seed, path, false, uint16(7), uint8(3))
		}
	}
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"), "a", true, uint16(1), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, path string, sha256 bool, bufExtra uint16, chunk uint8) {
		hashLen := 40
		if sha256 {
			hashLen = 64
		}
		wantFound, wantErr := indexHasPathWhole(data, path, hashLen)
		var src io.Reader = bytes.NewReader(data)
		if chunk > 0 {
			src = &chunkReader{r: src, n: int(chunk)}
		}
		if chunk%2 == 1 {
			src = iotest.DataErrReader(src)
		}
		buf := make([]byte, indexMinBuf+int(bufExtra))
		gotFound, srcErr, gotErr := scanIndex(src, int64(len(data)), path, hashLen, buf)
		if srcErr != nil {
			t.Fatalf("scanIndex of %d bytes: the reader failed: %v", len(data), srcErr)
		}
		if gotFound != wantFound || (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("scanIndex(%q, %q, %d) with a buffer of %d, %d bytes a read = %v, %v; the whole-buffer parser gives %v, %v",
				data, path, hashLen, len(buf), chunk, gotFound, gotErr, wantFound, wantErr)
		}
		if gotErr != nil && errors.Is(gotErr, errors.ErrUnsupported) != errors.Is(wantErr, errors.ErrUnsupported) {
			t.Fatalf("scanIndex(%q): %v is unsupported: %v; the whole-buffer parser's %v: %v", data, gotErr,
				errors.Is(gotErr, errors.ErrUnsupported), wantErr, errors.Is(wantErr, errors.ErrUnsupported))
		}
	})
}

// indexSeeds are the index fixtures of testdata: versions 2 to 4, SHA-256,
// names longer than the least buffer (index-v2-long, index-v4-long, whose
// prefix compression keeps long parts, with a cache tree and an untracked
// cache), a sparse index and a split index.
func indexSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var seeds [][]byte
	for _, name := range []string{"index-v2", "index-v3", "index-v4", "index-sha256", "index-v2-long", "index-v4-long", "index-sparse", "index-split"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	return seeds
}

// chunkReader gives at most n bytes a read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// indexHasPathWhole is the index parser as it was before indexes were
// read through a buffer, kept as the oracle of the streaming one: it
// reports whether the Git index in data tracks path (slash
// separated, relative to the top level), compared byte for byte: no pathspec
// magic. A path under a sparse directory entry is unsupported: git decides
// by the entry's tree. The
// index is checked whole, as git checks it when it reads one: header,
// every entry and the extensions. The trailing checksum is not verified,
// as git verifies it only in fsck (a checksum that does not match is read
// by every git command); hashLen is 40 (SHA-1) or 64 (SHA-256) hex digits.
func indexHasPathWhole(data []byte, path string, hashLen int) (bool, error) {
	hashSize := hashLen / 2
	if len(data) < indexHeaderBytes+hashSize {
		return false, errors.New("index is truncated")
	}
	if string(data[:4]) != "DIRC" {
		return false, errors.New("index has no DIRC signature")
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return false, fmt.Errorf("index version %d: %w", version, errors.ErrUnsupported)
	}
	count := binary.BigEndian.Uint32(data[8:12])
	body := data[:len(data)-hashSize]

	target := []byte(path)
	found := false
	var prev []byte // version 4: the previous entry's path
	off := indexHeaderBytes
	for i := uint32(0); i < count; i++ {
		fixed := indexStatBytes + hashSize + 2
		if off+fixed > len(body) {
			return false, errors.New("index is truncated")
		}
		mode := binary.BigEndian.Uint32(body[off+24 : off+28])
		flags := binary.BigEndian.Uint16(body[off+indexStatBytes+hashSize:])
		if flags&indexExtended != 0 {
			if version < 3 {
				return false, errors.New("index version 2 entry has extended flags")
			}
			fixed += 2
			if off+fixed > len(body) {
				return false, errors.New("index is truncated")
			}
			if x := binary.BigEndian.Uint16(body[off+fixed-2:]); x&^indexKnownExt != 0 {
				return false, fmt.Errorf("index entry %d has extended flags %#04x, of which git knows only %#04x", i, x, indexKnownExt)
			}
		}
		p := off + fixed
		var name []byte
		if version == 4 {
			strip, n := indexVarintWhole(body[p:])
			if n <= 0 || strip > uint64(len(prev)) {
				return false, errors.New("index has a bad path prefix")
			}
			p += n
			end := bytes.IndexByte(body[p:], 0)
			if end < 0 {
				return false, errors.New("index is truncated")
			}
			prev = append(prev[:uint64(len(prev))-strip], body[p:p+end]...)
			name = prev
			off = p + end + 1
		} else {
			end := bytes.IndexByte(body[p:], 0)
			if end < 0 {
				return false, errors.New("index is truncated")
			}
			name = body[p : p+end]
			off += (fixed + end + 8) &^ 7
			if off > len(body) {
				return false, errors.New("index is truncated")
			}
		}
		if l := int(flags & indexNameMask); l != indexNameMask && l != len(name) {
			return false, fmt.Errorf("index entry %d: its flags say its name is %d bytes long, and it is %d", i, l, len(name))
		}
		if !found {
			found = bytes.Equal(name, target)
			if mode == indexSparseDir && len(name) > 0 && name[len(name)-1] == '/' && bytes.HasPrefix(target, name) {
				// Whether git tracks a path under a sparse directory
				// entry depends on the entry's tree, which git expands
				// from the object store and this package does not read.
				return false, unsupportedf("%s is under the sparse directory entry %s of the index, whose tree this package does not read", target, name)
			}
		}
	}
	for off < len(body) {
		if off+8 > len(body) {
			return false, errors.New("index extension is truncated")
		}
		sig := string(body[off : off+4])
		size := binary.BigEndian.Uint32(body[off+4 : off+8])
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
		if uint64(size) > uint64(len(body)-off-8) {
			return false, errors.New("index extension is truncated")
		}
		off += 8 + int(size)
	}
	return found, nil
}

// indexVarintWhole decodes the offset encoding of index version 4 (varint.c in
// Git, not LEB128): each continuation adds one before shifting. It returns
// the value and the bytes used, or n <= 0 when the input ends or overflows.
func indexVarintWhole(b []byte) (v uint64, n int) {
	for i, c := range b {
		if i > 0 {
			if v >= 1<<56 {
				return 0, -1
			}
			v = (v+1)<<7 | uint64(c&0x7f)
		} else {
			v = uint64(c & 0x7f)
		}
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}
