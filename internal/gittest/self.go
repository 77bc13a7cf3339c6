package gittest

import (
	"os"
	"os/exec"
)

// Self returns a command that runs this test binary again (as a child the
// test controls through its environment), with env added to the test's
// own environment.
//
// Under the race detector a process sleeps a second before it exits, to
// let reports finish; the child is told not to, so a test that runs many
// children does not wait a second for each. Reports still print.
func Self(args []string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	return cmd
}
