//go:build !windows

package gittest

import (
	"io"
	"os/exec"
	"testing"
)

// longChild is the command of LongChild, not started.
func longChild(testing.TB) (*exec.Cmd, io.Closer) {
	return exec.Command("sleep", "60"), nil
}
