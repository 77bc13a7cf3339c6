//go:build unix

package updater

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProbeProcess(t *testing.T) {
	self := ProbeProcess(int64(os.Getpid()))
	assert.Equal(t, ProcessAlive, self.State)
	cmd := exec.Command("git", "--version")
	require.NoError(t, cmd.Run())
	assert.Equal(t, ProcessGone, ProbeProcess(int64(cmd.Process.Pid)).State)
	// Values kill(2) would truncate are never asked about.
	assert.Equal(t, LivenessUnknown, ProbeProcess(1<<32+int64(os.Getpid())).State)
	assert.Equal(t, LivenessUnknown, ProbeProcess(-1).State)
}
