package gittest

import (
	"io"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// longChild is the command of LongChild, not started: this test binary,
// waiting on its standard input.
func longChild(t testing.TB) (*exec.Cmd, io.Closer) {
	child := Self(nil, WaitChildEnv+"=1")
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	return child, stdin
}
