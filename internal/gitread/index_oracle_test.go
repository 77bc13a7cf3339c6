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
		gotFound, srcErr, gotErr := scanIndex(src, bytes.NewReader(data), int64(len(data)), path, hashLen, buf)
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
// by the entry's tree. The index is read as git's do_read_index and
// create_from_disk read it from a map of the file: an entry's name as long
// as its flags say, read as a C string, entries bounded by the file's end
// only, extensions while 8 bytes are left before the checksum. The
// trailing checksum is not verified, as git verifies it only in fsck (a
// checksum that does not match is read by every git command); hashLen is
// 40 (SHA-1) or 64 (SHA-256) hex digits.
func indexHasPathWhole(data []byte, path string, hashLen int) (bool, error) {
	hashSize := hashLen / 2
	if len(data) < indexHeaderBytes+hashSize {
		return false, errIndexTruncated
	}
	if string(data[:4]) != "DIRC" {
		return false, errors.New("index has no DIRC signature")
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return false, fmt.Errorf("index version %d: %w", version, errors.ErrUnsupported)
	}
	count := binary.BigEndian.Uint32(data[8:12])
	eoie, blocks, err := indexTables(bytes.NewReader(data), int64(len(data)), int64(hashSize), count)
	if err != nil {
		return false, err
	}
	starts := map[uint32]int64{} // git's offset table: where blocks start
	for _, b := range blocks {
		starts[b.first] = b.offset
	}

	found := false
	var prev []byte // version 4: the previous entry's name, as long as git takes it
	off := indexHeaderBytes
	for i := uint32(0); i < count; i++ {
		start, block := starts[i]
		if block && start != int64(off) {
			return false, errIndexThreads
		}
		fixed := indexStatBytes + hashSize + 2
		if off+fixed > len(data) {
			return false, errIndexTruncated
		}
		mode := binary.BigEndian.Uint32(data[off+24 : off+28])
		flags := binary.BigEndian.Uint16(data[off+indexStatBytes+hashSize:])
		if flags&indexExtended != 0 {
			fixed += 2
			if off+fixed > len(data) {
				return false, errIndexTruncated
			}
			if x := binary.BigEndian.Uint16(data[off+fixed-2:]); x&^indexKnownExt != 0 {
				return false, fmt.Errorf("index entry %d has extended flags %#04x, of which git knows only %#04x", i, x, indexKnownExt)
			}
		}
		p := off + fixed
		var kept []byte
		if version == 4 {
			strip, n := indexVarint(data[p:])
			if n < 0 {
				return false, errIndexTruncated
			}
			p += n
			if i > 0 {
				if strip > uint64(len(prev)) {
					return false, errIndexPrefix
				}
				kept = prev[:uint64(len(prev))-strip]
				if block && len(kept) != 0 {
					return false, errIndexThreads
				}
			}
		}
		var name []byte // the name and the byte after it
		if l := int(flags & indexNameMask); l != indexNameMask {
			if l+1 < len(kept) {
				return false, errIndexPrefix
			}
			more := l + 1 - len(kept)
			if p+more > len(data) {
				return false, errIndexTruncated
			}
			name = append(append([]byte(nil), kept...), data[p:p+more]...)
			p += more
		} else {
			end := bytes.IndexByte(data[p:], 0)
			if end < 0 {
				return false, errIndexTruncated
			}
			name = append(append([]byte(nil), kept...), data[p:p+end+1]...)
			p += end + 1
		}
		cname, _, terminated := bytes.Cut(name, []byte{0})
		if !terminated {
			return false, fmt.Errorf("index entry %d: %w", i, errIndexUnterminated)
		}
		name = name[:len(name)-1]
		if version == 4 {
			off = p
			prev = name
		} else {
			off += (fixed + len(name) + 8) &^ 7
		}
		if !found {
			found = string(cname) == path
			if mode == indexSparseDir && len(cname) > 0 && cname[len(cname)-1] == '/' && strings.HasPrefix(path, string(cname)) {
				// Whether git tracks a path under a sparse directory
				// entry depends on the entry's tree, which git expands
				// from the object store and this package does not read.
				return false, unsupportedf("%s is under the sparse directory entry %s of the index, whose tree this package does not read", path, cname)
			}
		}
	}
	if eoie != 0 && eoie != int64(off) {
		return false, errIndexThreads
	}
	for ext := int64(off); ext+8 <= int64(len(data)-hashSize); {
		sig := string(data[ext : ext+4])
		size := int64(binary.BigEndian.Uint32(data[ext+4 : ext+8]))
		ext += 8
		switch sig {
		case "link":
			return false, errSplitIndex
		case "sdir", "EOIE", "IEOT":
		case "TREE", "REUC", "UNTR", "FSMN":
			if ext+size > int64(len(data)) {
				return false, errIndexExtPastEnd
			}
		default:
			if sig[0] < 'A' || sig[0] > 'Z' {
				return false, unsupportedf("index extension %q is required, and this package does not read it", sig)
			}
		}
		ext += size
	}
	return found, nil
}
