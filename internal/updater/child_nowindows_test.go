//go:build !windows

package updater

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// longChild starts a child process that lives until the test ends or it
// is killed.
func longChild(t *testing.T) *exec.Cmd {
	t.Helper()
	child := exec.Command("sleep", "60")
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	return child
}
