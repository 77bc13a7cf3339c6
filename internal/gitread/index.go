package gitread

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
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
	indexSparseDir   = 0o040000
	indexHeaderBytes = 12
)

// indexHasPath reports whether the Git index in data tracks path (slash
// separated, relative to the top level), compared byte for byte: no pathspec
// magic. A path under a sparse directory entry is unsupported: git decides
// by the entry's tree. The
// index is checked whole, as git checks it when it reads one: header,
// every entry and the extensions. The trailing checksum is not verified,
// as git verifies it only in fsck (a checksum that does not match is read
// by every git command); hashLen is 40 (SHA-1) or 64 (SHA-256) hex digits.
func indexHasPath(data []byte, path string, hashLen int) (bool, error) {
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
		}
		p := off + fixed
		var name []byte
		if version == 4 {
			strip, n := indexVarint(body[p:])
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

// indexVarint decodes the offset encoding of index version 4 (varint.c in
// Git, not LEB128): each continuation adds one before shifting. It returns
// the value and the bytes used, or n <= 0 when the input ends or overflows.
func indexVarint(b []byte) (v uint64, n int) {
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
