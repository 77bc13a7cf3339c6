//go:build !windows

package runtimeguard

import "testing"

// tempDir is t.TempDir: see tempdir_windows_test.go for why it exists.
func tempDir(t testing.TB) string {
	t.Helper()
	return t.TempDir()
}
