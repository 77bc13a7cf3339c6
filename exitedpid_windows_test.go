//go:build windows

package runtimeguard

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/windows"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// exitedPID returns the ID of a child that has exited, with a handle to it
// held until the test ends: while a handle is open, Windows gives its ID to
// no other process.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := gittest.Self([]string{"-test.run=^$"})
	require.NoError(t, cmd.Start())
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(cmd.Process.Pid))
	require.NoError(t, err)
	t.Cleanup(func() { windows.CloseHandle(h) })
	require.NoError(t, cmd.Wait())
	return cmd.Process.Pid
}
