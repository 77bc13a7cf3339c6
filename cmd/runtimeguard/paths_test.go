package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// update writes the latest receipt where the layout keeps it, whichever
// receipt is newest: a retained receipt of another run, newer than the
// latest one (an updater may write its own run's file and leave the
// latest), is neither overwritten nor taken for the latest.
func TestUpdateWritesTheLayoutsLatestReceipt(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	dir := filepath.Join(c.home, "logs", "update_receipts")
	latest := filepath.Join(dir, "latest.json")
	old := updater.Receipt{UpdateID: "old", Outcome: updater.OutcomeSuccess,
		StartedAt: time.Now().Add(-2 * time.Hour).UTC(), FinishedAt: time.Now().Add(-2 * time.Hour).UTC()}
	require.NoError(t, updater.WriteReceipt("", latest, old, 1))
	require.NoError(t, os.Chtimes(latest, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour)))
	other := updater.Receipt{UpdateID: "other", Outcome: updater.OutcomeFailed,
		StartedAt: time.Now().Add(-time.Hour).UTC(), FinishedAt: time.Now().Add(-time.Hour).UTC()}
	scratch := filepath.Join(gittest.TempDir(t), "latest.json") // the file's bytes, as the writer makes them
	require.NoError(t, updater.WriteReceipt("", scratch, other, 2))
	data, err := os.ReadFile(scratch)
	require.NoError(t, err)
	otherPath := filepath.Join(dir, updater.ReceiptFileName(&other, 2))
	require.NoError(t, os.WriteFile(otherPath, data, 0o644))
	require.NoError(t, os.Chtimes(otherPath, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)))
	o, err := runtimeguard.Observe(runtimeguard.Options{ModulePath: c.module, HomeDir: c.home})
	require.NoError(t, err)
	require.Equal(t, otherPath, o.ReceiptPath, "the case: the retained receipt is the newest")

	r := c.update(t, "git", "pull", "-q", "--ff-only")
	require.Equal(t, 0, r.code, r.stderr)
	m := c.receipt(t)
	assert.Equal(t, "success", m["outcome"])
	assert.NotEqual(t, "old", m["update_id"], "the latest receipt is this run's")
	kept, err := os.ReadFile(otherPath)
	require.NoError(t, err)
	assert.Equal(t, data, kept, "another run's receipt is left as it was")
	assert.Contains(t, r.stderr, "("+latest+")")
}

// An error of the library is printed as the library says it, once
// prefixed; the command's own errors name the command.
func TestLibraryErrorsPrintedAsTheySay(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	dir := gittest.TempDir(t)
	module := filepath.Join(dir, "run_agent.py")
	require.NoError(t, os.WriteFile(module, []byte("x\n"), 0o644))
	rev := strings.Repeat("a", 40)
	_, want := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: dir, ExpectRevision: rev})
	require.Error(t, want)
	r := runCmd(t, dir, "check", "--module", module, "--home", dir, "--expect", rev)
	assert.Equal(t, exitError, r.code)
	assert.Equal(t, want.Error()+"\n", r.stderr)

	r = runCmd(t, dir, "check", "--module", filepath.Join(dir, "missing.py"), "--expect", rev)
	assert.Equal(t, exitUsage, r.code)
	assert.True(t, strings.HasPrefix(r.stderr, "runtimeguard check: "), "%q", r.stderr)
	// The prefix once (the path itself may hold the word: a temporary
	// directory's name).
	assert.Equal(t, 1, strings.Count(r.stderr, "runtimeguard check: ")+strings.Count(r.stderr, "runtimeguard: "), "%q", r.stderr)
}
