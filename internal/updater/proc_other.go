//go:build !unix && !windows

package updater

import "time"

// ProcessStart cannot tell when a process started on this platform.
func ProcessStart(int64) (start time.Time, zombie bool) {
	return time.Time{}, false
}
