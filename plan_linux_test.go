package runtimeguard

import (
	"context"
	"testing"

	"path/filepath"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The same checkout updated under another name, a bind mount of it (as a
// container's volume is): its newer failure receipt is this checkout's,
// and refuses the plan the older success would make.
func TestReceiptOfTheSameCheckoutUnderABindMount(t *testing.T) {
	c := newReloadCase(t)
	alias := filepath.Join(tempDir(t), "alias")
	require.NoError(t, unix.Mkdir(alias, 0o755))
	if err := unix.Mount(c.dir, alias, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("no bind mount here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(alias, unix.MNT_DETACH) })
	updateUnder(t, c.home, c.dir, c.dir, "true")
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err, "the success proves")
	r.Release()
	res := updateUnder(t, c.home, alias, alias, "false")
	require.NotEmpty(t, res.Failure)
	_, err = c.g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady, "the newest update of this checkout failed")
	assert.ErrorContains(t, err, `"failed"`)
}
