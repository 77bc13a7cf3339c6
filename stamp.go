package runtimeguard

import "time"

// stamp is what a stat says of a file: enough to tell that it was replaced
// or rewritten. present is false when nothing is at the path.
type stamp struct {
	present  bool
	dir      bool
	dev, ino uint64
	mode     uint32
	size     int64
	mtime    int64 // nanoseconds since the Unix epoch
	ctime    int64 // nanoseconds since the Unix epoch; 0 where unknown
}

// Margins of Git's "racy" rule: a file whose timestamps are not at least
// this much older than the moment its read began could be rewritten within
// the same timestamp tick without any visible change, so a stamp of it is
// not trusted. File systems with sub-second timestamps advance them with a
// coarse clock (a scheduler tick on Linux, 15.6 ms on Windows); others keep
// whole seconds or, like FAT, two.
const (
	fineTimestampMargin   = 100 * time.Millisecond
	coarseTimestampMargin = 3 * time.Second
)

// settled reports whether s can be trusted to change if the file changes
// after readStart (nanoseconds since the Unix epoch).
func (s stamp) settled(readStart int64) bool {
	if !s.present {
		return true
	}
	margin := int64(fineTimestampMargin)
	if s.mtime%int64(time.Second) == 0 { // whole seconds: a coarse file system
		margin = int64(coarseTimestampMargin)
	}
	limit := readStart - margin
	return s.mtime < limit && s.ctime < limit
}
