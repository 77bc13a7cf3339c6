//go:build !linux

package updater

import "time"

// recordedStart is start: outside Linux the updater's writers read a
// process's creation time from the clock processStart reads.
func recordedStart(start time.Time) time.Time { return start }

// procHandle is absent here: a process is probed each time.
type procHandle struct {
	pid   int64
	start time.Time
}

// openProc keeps no handle here.
func openProc(int64, time.Time) *procHandle { return nil }

func (h *procHandle) alive() bool { return false }

func (h *procHandle) close() {}
