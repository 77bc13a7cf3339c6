package gittest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/windows"
)

// ExitedPID returns the ID of a child that has exited, with a handle to it
// held until the test ends: while a handle is open, Windows gives its ID to
// no other process. (gone is for the platforms where a zombie is told
// from a live process by the caller's probe: not here.)
func ExitedPID(t testing.TB, gone func(pid int) bool) int {
	t.Helper()
	cmd := Self([]string{"-test.run=^$"})
	require.NoError(t, cmd.Start())
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(cmd.Process.Pid))
	require.NoError(t, err)
	t.Cleanup(func() { windows.CloseHandle(h) })
	require.NoError(t, cmd.Wait())
	return cmd.Process.Pid
}
