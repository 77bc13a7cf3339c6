//go:build windows

package updater

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// longChild starts a child process (this test binary, waiting on its
// standard input) that lives until the test ends or it is killed.
func longChild(t *testing.T) *exec.Cmd {
	t.Helper()
	child := gittest.Self(nil, waitChildEnv+"=1")
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = child.Process.Kill(); _ = child.Wait() })
	return child
}
