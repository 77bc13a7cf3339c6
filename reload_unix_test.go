//go:build unix

package runtimeguard

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	home := filepath.Join(root, "home")
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
