//go:build unix && !linux

package gittest

import (
	"testing"
	"time"
)

// awaitExit waits for the child pid to exit, unreaped, until gone says
// so; the test is skipped where that does not come.
func awaitExit(t testing.TB, pid int, gone func(pid int) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if gone(pid) {
			return
		}
	}
	t.Skip("an exited child cannot be told from a live one on this platform")
}
