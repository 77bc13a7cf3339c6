//go:build !linux

package gittest

import "testing"

// FullDatagramSocket skips the test: a service manager's notification
// socket whose queue is full is a test of Linux.
func FullDatagramSocket(tb testing.TB, name string) {
	tb.Helper()
	tb.Skip("a full notification socket is made on Linux only")
}
