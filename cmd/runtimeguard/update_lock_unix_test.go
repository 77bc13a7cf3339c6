//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// hermesUpdater starts the repository's stand-in for hermes update's hold
// on the checkout lock (testdata/hermes_updater.py, run in mode hold), and
// returns its first line ("locked", or "busy" once it gave up) and a way
// to end it, which returns its exit status.
func hermesUpdater(t *testing.T, lock string) (string, func() int) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "hermes_updater.py"))
	require.NoError(t, err)
	cmd := exec.Command(python, "-I", script, "hold", lock)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line), func() int {
		stdin.Close()
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	}
}

// hermes update first: it holds the checkout lock, and the wrapper refuses
// without running its command, claiming the marker or writing a receipt.
func TestUpdateRefusesWhileHermesUpdateHoldsTheCheckout(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	state, end := hermesUpdater(t, filepath.Join(c.dir, ".git", "hermes-update.lock"))
	require.Equal(t, "locked", state)
	ran := filepath.Join(gittest.TempDir(t), "ran")
	r := c.update(t, "sh", "-c", "touch "+ran)
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "another update of the checkout runs")
	assert.NoFileExists(t, ran, "the command ran")
	assert.NoFileExists(t, filepath.Join(c.home, ".hermes-update-in-progress"))
	assert.NoDirExists(t, filepath.Join(c.home, "logs"), "a receipt was written")
	assert.Equal(t, 0, end())
}

// The wrapper first: while its command (and what that command started)
// runs, hermes update finds the checkout locked and gives up busy; its
// marker is of the updater's current format, with this process's creation
// time.
func TestHermesUpdateRefusedWhileTheWrapperRuns(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	tmp := gittest.TempDir(t)
	started, gate := filepath.Join(tmp, "started"), filepath.Join(tmp, "gate")
	require.NoError(t, syscall.Mkfifo(gate, 0o600))
	t.Cleanup(func() { // lets a child left by a failure end
		if f, err := os.OpenFile(gate, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	// The command starts a child that outlives it, then ends: the child
	// holds the inherited lock until the gate opens.
	args := []string{"update", "--module", c.module, "--home", c.home, "--wait", "200ms", "--",
		"sh", "-c", `(cat "$1" >/dev/null 2>&1 </dev/null) & touch "$0"`, started, gate}
	cmd := commandProcess(args...)
	cmd.Dir = c.dir
	cmd.Env = append(cmd.Env, gittest.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, cmd.Wait(), stderr.String())

	state, end := hermesUpdater(t, filepath.Join(c.dir, ".git", "hermes-update.lock"))
	assert.Equal(t, "busy", state, "the wrapper's command's child holds the checkout")
	assert.Equal(t, 2, end())

	f, err := os.OpenFile(gate, os.O_WRONLY, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close()) // the child reads to the end, and exits
	require.Eventually(t, func() bool {
		state, end := hermesUpdater(t, filepath.Join(c.dir, ".git", "hermes-update.lock"))
		end()
		return state == "locked"
	}, 30*time.Second, 10*time.Millisecond, "the checkout is free once the child ended")
}
