package gitread

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// The index file of a checkout: opened, checked from its ends, and
// scanned (see scanIndex), and the reuse of an unchanged one.

// indexHead refuses an index whose header is not one, or whose entries
// cannot fit in its size.
func indexHead(hashLen int) func(head, tail []byte, size int64) error {
	return func(head, _ []byte, size int64) error {
		switch {
		case len(head) < indexHeaderBytes || string(head[:4]) != "DIRC":
			return errors.New("index has no DIRC signature")
		case binary.BigEndian.Uint32(head[4:8]) < 2 || binary.BigEndian.Uint32(head[4:8]) > 4:
			return fmt.Errorf("index version %d: %w", binary.BigEndian.Uint32(head[4:8]), errors.ErrUnsupported)
		}
		if count := int64(binary.BigEndian.Uint32(head[8:12])); indexHeaderBytes+count*int64(indexStatBytes+hashLen/2+2) > size {
			return errors.New("index is truncated")
		}
		return nil
	}
}

// Index is what a read found in a worktree's index for the module: whether
// it tracks it, for an index of one stamp, read with one object format.
// A later read that finds the index with the same stamp takes the answer
// again instead of reading the index (see ReadAgain).
type Index struct {
	path    string // the index file
	rel     string // the module's path in it
	hashLen int
	stamp   fsread.Stamp
	tracked bool
}

// Settled reports whether the index's stamp can be trusted to change if
// the index changes after readStart, when the read that found it began
// (see fsread.Stamp.Settled): only such an answer may be taken again.
func (x *Index) Settled(readStart time.Time) bool { return x.stamp.Settled(readStart) }

// indexTracks reports whether the index at path tracks rel, taking the
// answer of the earlier read's index where a stat finds it unchanged, else
// reading it through a buffer (or whole, where the FS cannot stream).
func (r *reader) indexTracks(path, rel string, hashLen int) (bool, error) {
	if p := r.prevIndex; p != nil && p.path == path && p.rel == rel && p.hashLen == hashLen {
		if st, err := r.fs.Stat(path); err == nil && st == p.stamp {
			r.addDep(path, false, st)
			r.index = p
			return p.tracked, nil
		}
	}
	if err := r.checkEnds(path, indexHead(hashLen)); err != nil {
		return false, err
	}
	var (
		found, ok bool
		st        fsread.Stamp
		err       error
	)
	if r.fs.Open != nil {
		found, st, ok, err = r.streamIndex(path, rel, hashLen)
	} else {
		var data []byte
		if data, st, err = r.fs.ReadFile(path, maxIndexBytes, false); err != nil {
			return false, err
		}
		r.addDep(path, false, st)
		if ok = st.Present() && !st.IsDir(); ok {
			found, err = indexHasPath(data, rel, hashLen)
			if err != nil && !errors.Is(err, fsread.ErrChanged) {
				err = &contentError{fmt.Errorf("%s: %w", path, err)}
			}
		}
	}
	if err != nil || !ok {
		return false, err
	}
	r.index = &Index{path: path, rel: rel, hashLen: hashLen, stamp: st, tracked: found}
	return found, nil
}

// streamIndex reads the index at path through a buffer: see scanIndex.
// ok is false when nothing, or a directory, is there.
func (r *reader) streamIndex(path, rel string, hashLen int) (found bool, st fsread.Stamp, ok bool, err error) {
	f, st, err := r.fs.Open(path, maxIndexBytes, false)
	if err != nil {
		return false, st, false, err
	}
	r.addDep(path, false, st)
	if f == nil {
		return false, st, false, nil
	}
	defer f.Close()
	buf := indexBufs.Get().(*[]byte)
	defer indexBufs.Put(buf)
	at, _ := f.(io.ReaderAt)
	found, srcErr, err := scanIndex(f, at, st.Size(), rel, hashLen, *buf)
	switch {
	case srcErr != nil:
		return false, st, true, srcErr
	case err != nil:
		return false, st, true, &contentError{fmt.Errorf("%s: %w", path, err)}
	}
	return found, st, true, nil
}
