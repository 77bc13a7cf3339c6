//go:build unix && !linux && !darwin

package updater

import "time"

// ProcessStart cannot tell when a process started on this platform: a
// marker's process is judged by liveness alone.
func ProcessStart(int64) (start time.Time, zombie bool) {
	return time.Time{}, false
}
