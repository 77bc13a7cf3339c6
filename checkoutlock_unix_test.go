//go:build unix

package runtimeguard

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// pyUpdater is testdata/hermes_updater.py, run in a mode: a process that
// takes the checkout lock as the Hermes updater does.
type pyUpdater struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startPyUpdater(t *testing.T, args ...string) *pyUpdater {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH")
	}
	script, err := filepath.Abs(filepath.Join("testdata", "hermes_updater.py"))
	require.NoError(t, err)
	cmd := exec.Command(python, append([]string{"-I", script}, args...)...)
	cmd.Stderr = os.Stderr
	p := &pyUpdater{cmd: cmd}
	p.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p.out = bufio.NewReader(out)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		p.stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

// line reads the script's next line.
func (p *pyUpdater) line(t *testing.T) string {
	t.Helper()
	s, err := p.out.ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(s)
}

// The updater's completion child holds the checkout lock after its parent
// wrote the success receipt and exited (its marker long gone): the update
// is in progress, and no reload is proven until that child exits.
func TestCheckoutLockHeldByAChildAfterItsOwnerExited(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	lock := filepath.Join(c.dir, ".git", "hermes-update.lock")
	p := startPyUpdater(t, "handoff", lock)
	first := p.line(t)
	child, err := strconv.Atoi(strings.TrimPrefix(first, "child "))
	require.NoError(t, err, "%q", first)
	t.Cleanup(func() { _ = unix.Kill(child, unix.SIGKILL) })
	require.NoError(t, p.cmd.Wait(), "the owner exited")

	o := c.g.Observe()
	assert.Equal(t, UpdateActive, o.State)
	assert.Equal(t, lockHeld, o.CheckoutLock)
	assert.Equal(t, lock, o.CheckoutLockPath)
	_, err = c.g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	assert.ErrorContains(t, err, "the checkout lock "+lock+" is held")
	assert.True(t, isPending(err), "an update still runs: a proof may come")
	var se *StaleError
	require.ErrorAs(t, c.g.EnsureCurrent(), &se)
	assert.Equal(t, UpdateActive, se.State)

	p.stdin.Close() // the child reads its stdin, the pipe the owner passed on, to its end
	require.Eventually(t, func() bool { return unix.Kill(child, 0) == unix.ESRCH || isZombie(child) },
		10*time.Second, 5*time.Millisecond, "the child exits")
	require.Eventually(t, func() bool { return c.g.Observe().CheckoutLock == lockFree }, 10*time.Second, 5*time.Millisecond)
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err, "the lock free, the receipt proves")
	r.Release()
}

// isZombie reports whether pid has exited and waits to be reaped.
func isZombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && len(stat) > i+2 && stat[i+2] == 'Z'
}

// The checkout's lock is in its Git directory: held by a process that took
// it as the updater does, the update is active; free once that ends.
func TestCheckoutLockHeldAndFreed(t *testing.T) {
	c := newReloadCase(t)
	assert.Equal(t, filepath.Join(c.dir, ".git", "hermes-update.lock"), c.g.Observe().CheckoutLockPath)

	p := startPyUpdater(t, "hold", filepath.Join(c.dir, ".git", "hermes-update.lock"))
	require.Equal(t, "locked", p.line(t))
	assert.Equal(t, UpdateActive, c.g.Observe().State)
	p.stdin.Close()
	require.NoError(t, p.cmd.Wait())
	assert.Equal(t, lockFree, c.g.Observe().CheckoutLock)
}

// A guard's probes never make a starting updater fail: the updater's own
// acquire (each try 20 ms apart for 3 s) races guards that probe the lock
// back to back, through Observe, for hundreds of rounds, and never gives
// up.
func TestProbesNeverMakeTheUpdaterFail(t *testing.T) {
	c := newReloadCase(t)
	lock := filepath.Join(c.dir, ".git", "hermes-update.lock")
	writeFile(t, lock, "")
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	done := make(chan struct{})
	probed := make(chan int, 2)
	for range 2 {
		go func() {
			n := 0
			for {
				select {
				case <-done:
					probed <- n
					return
				default:
				}
				c.g.Observe()
				n++
			}
		}()
	}
	p := startPyUpdater(t, "rounds", lock, strconv.Itoa(rounds))
	failed := p.line(t)
	close(done)
	n := <-probed + <-probed
	assert.Equal(t, "0", failed, "tries of the updater that gave up, against %d probes", n)
	assert.Greater(t, n, rounds, "the guards probed throughout")
}
