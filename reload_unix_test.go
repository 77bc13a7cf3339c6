//go:build unix

package runtimeguard

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// A FIFO at the receipt's path is refused at once.
func TestPlanReloadFIFOReceipt(t *testing.T) {
	c := newReloadCase(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(c.receiptPath()), 0o755))
	mkfifo(t, c.receiptPath())
	done := make(chan error, 1)
	go func() { _, err := c.g.PlanReload(context.Background()); done <- err }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "named pipe")
	case <-time.After(10 * time.Second):
		t.Fatal("PlanReload blocked on a FIFO receipt")
	}
}

// A deploy that flips a link loads the install the link leads to now: its
// recovery markers stop a plan as the bound install's do, and the stale
// answer and the observation report them.
func TestPlanReloadSeesTheNewInstallsRecoveryMarkers(t *testing.T) {
	root := tempDir(t)
	v1, v2 := filepath.Join(root, "v1"), filepath.Join(root, "v2")
	_, loaded := agentRepo(t, v1)
	git(t, root, "clone", "-q", v1, v2)
	moved := commit(t, v2, "run_agent.py", "class AIAgent: revision = 2\n")
	current := filepath.Join(root, "current")
	require.NoError(t, os.Symlink("v1", current))
	home := root // Hermes's home holds its install, as its installer makes it
	g, err := New(Options{ModulePath: filepath.Join(current, "run_agent.py"), HomeDir: home})
	require.NoError(t, err)
	require.Equal(t, loaded, g.Identity().Revision)

	require.NoError(t, os.Symlink("v2", current+".new"))
	require.NoError(t, os.Rename(current+".new", current))
	writeFile(t, filepath.Join(v2, hermesIncomplete), "")
	writeFile(t, filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", loaded, moved, time.Now()))
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, UpdateIncomplete, se.State, "the 409 says the install it leads to is half updated")
	assert.Contains(t, g.Observe().RecoveryMarkers, filepath.Join(resolved(t, v2), hermesIncomplete))
	r, err := g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	assert.Nil(t, r)
	assert.ErrorContains(t, err, filepath.Join(resolved(t, v2), hermesIncomplete))

	require.NoError(t, os.Remove(filepath.Join(v2, hermesIncomplete)))
	r, err = g.PlanReload(context.Background())
	require.NoError(t, err)
	assert.Equal(t, moved, r.To)
	require.NoError(t, r.Bind(context.Background()))
	assert.Equal(t, resolved(t, v2), g.Identity().SourceDir)
	assert.NoError(t, g.EnsureCurrent())
}

// A link at the layout's lock in the home: PlanReload neither creates a
// file where the link leads nor opens one there; it plans nothing, and
// says why.
func TestPlanReloadNeverLocksThroughALink(t *testing.T) {
	for _, dangling := range []bool{false, true} {
		c := newReloadCase(t)
		c.success(t)
		target := filepath.Join(tempDir(t), "elsewhere")
		if !dangling {
			writeFile(t, target, "keep\n")
		}
		require.NoError(t, os.Symlink(target, filepath.Join(c.home, "update.lock")))
		r, err := c.g.PlanReload(context.Background())
		r.Release()
		require.ErrorIs(t, err, ErrNotReady, "dangling %v", dangling)
		assert.ErrorContains(t, err, "symbolic link")
		if dangling {
			assert.NoFileExists(t, target, "a lock file made where the link leads")
		} else {
			data, err := os.ReadFile(target)
			require.NoError(t, err)
			assert.Equal(t, "keep\n", string(data))
		}
	}
}

// A plan takes the layout's lock shared with read access alone: its lock
// file is open for reading only, so a server that may read the lock file
// but not write it still plans.
func TestPlanHoldsTheLockForReadingOnly(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	lock := filepath.Join(c.home, "update.lock")
	writeFile(t, lock, "")
	require.NoError(t, os.Chmod(lock, 0o444))
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer r.Release()
	flags, err := unix.FcntlInt(r.LockFile().Fd(), unix.F_GETFL, 0)
	require.NoError(t, err)
	assert.Equal(t, unix.O_RDONLY, flags&unix.O_ACCMODE, "the plan's lock file is open for reading alone")
}

// runningReceipt is a receipt of outcome running, as an updater writes it
// before its command, naming its writer by the JSON fields given.
func runningReceipt(pre, writer string) string {
	return fmt.Sprintf(`{"schema": 1, "update_id": "u-running", "outcome": "running", "started_at": %q, "pre_update": {"sha": %q}%s}`,
		time.Now().UTC().Format(time.RFC3339Nano), pre, writer)
}

// A receipt that still says running, whose update provably ended (no
// marker, the checkout lock free, the process that wrote it gone) proves
// nothing and promises nothing: no plan, not pending, and a Reloader's 409
// is the manual one, not "shortly". Where its writer lives, or the receipt
// names none, or names one of another platform's range, the update may
// still finish it: a plan is awaited.
func TestOrphanedRunningReceipt(t *testing.T) {
	dead := gittest.ExitedPID(t, processGone)
	own := updater.OwnIdentity()
	ownCT := ""
	if own.HasCreated {
		ownCT = fmt.Sprintf(`, "pid_create_time": %f`, own.Created)
	}
	cases := []struct {
		name, writer string
		ended        bool
	}{
		{"its writer gone", fmt.Sprintf(`, "pid": %d, "pid_create_time": 1700000000.5`, dead), true},
		{"its writer gone, no creation time", fmt.Sprintf(`, "pid": %d`, dead), true},
		{"its writer and the one that persisted it gone", fmt.Sprintf(`, "pid": %d, "writer_pid": %d`, dead, dead), true},
		{"its writer alive", fmt.Sprintf(`, "pid": %d%s`, os.Getpid(), ownCT), false},
		{"its writer gone, the one that persisted it alive", fmt.Sprintf(`, "pid": %d, "writer_pid": %d`, dead, os.Getpid()), false},
		{"no writer named", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newReloaderCase(t, nil)
			c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
			c.writeReceipt(t, runningReceipt(c.loaded, tc.writer))
			_, err := c.g.PlanReload(context.Background())
			require.ErrorIs(t, err, ErrNotReady)
			assert.Equal(t, !tc.ended, isPending(err), "%v", err)
			if !tc.ended {
				require.Eventually(t, func() bool {
					a := c.get(t, "/")
					return a.code == http.StatusConflict && a.payload.Error == c.g.config().autoMessage
				}, 10*time.Second, 5*time.Millisecond, "the 409 awaits the update")
				return
			}
			assert.ErrorContains(t, err, "ended without finishing it")
			require.Eventually(t, func() bool {
				a := c.get(t, "/")
				return a.code == http.StatusConflict && a.payload.Error == c.g.config().message
			}, 10*time.Second, 5*time.Millisecond, "the 409 is the manual one")
			a := c.get(t, "/")
			assert.Contains(t, a.payload.Error, "manually")
			assert.False(t, a.payload.RestartScheduled)
		})
	}
}
