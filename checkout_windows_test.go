//go:build windows

package runtimeguard

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkoutEnv names a checkout the host made for the Windows tests (under
// Wine, where there is no git binary): "DIR;REVISION".
const checkoutEnv = "RUNTIMEGUARD_TEST_CHECKOUT"

// TestWindowsGuardOnCheckout reads a real checkout through Windows paths,
// binds to it, and sees a ref move through the stat fast path.
func TestWindowsGuardOnCheckout(t *testing.T) {
	var src, rev string
	if v := os.Getenv(checkoutEnv); v != "" {
		parts := strings.SplitN(v, ";", 2)
		require.Len(t, parts, 2, "%s=%q", checkoutEnv, v)
		// Work on a copy: the test moves the branch.
		src, rev = filepath.Join(tempDir(t), "agent"), parts[1]
		require.NoError(t, os.CopyFS(src, os.DirFS(parts[0])))
	} else if _, err := exec.LookPath("git"); err == nil {
		src = filepath.Join(tempDir(t), "agent")
		_, rev = agentRepo(t, src)
	} else {
		t.Skipf("no git binary, and %s names no checkout", checkoutEnv)
	}
	module := filepath.Join(src, "run_agent.py")
	got, err := inspectRevision(module)
	require.NoError(t, err)
	require.Equal(t, rev, got)

	e := testEnv(nil)
	e.now = func() time.Time { return time.Now().Add(time.Hour) } // every stamp settled
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	require.True(t, trusted(g), "the snapshot of a settled checkout is trusted")
	require.NoError(t, g.EnsureCurrent())

	moved := strings.Repeat("7", 40)
	writeFile(t, filepath.Join(src, ".git", "refs", "heads", "main"), moved+"\n")
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, moved, se.Current)
	assert.Equal(t, UpdateUnverified, se.State)
}
