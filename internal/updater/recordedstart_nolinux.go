//go:build !linux

package updater

import "time"

// RecordedStart is start: outside Linux the updater's writers read a
// process's creation time from the clock ProcessStart reads.
func RecordedStart(start time.Time) time.Time { return start }
