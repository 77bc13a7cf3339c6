//go:build !windows

package gittest

import "testing"

// TempDir is tb.TempDir: see tempdir_windows.go for why it exists.
func TempDir(tb testing.TB) string {
	tb.Helper()
	return tb.TempDir()
}
