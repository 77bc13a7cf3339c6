package updater

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/windows"
)

// lockBytes locks n bytes at off of the file at path through a handle of
// its own, as another process of the updater's tree does (byte-range locks
// belong to the handle): the returned function unlocks them.
func lockBytes(t *testing.T, path string, off, n uint32) func() {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	ov := windows.Overlapped{Offset: off}
	require.NoError(t, windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, n, 0, &ov))
	return func() {
		ov := windows.Overlapped{Offset: off}
		_ = windows.UnlockFileEx(windows.Handle(f.Fd()), 0, n, 0, &ov)
		f.Close()
	}
}

// The updater's lock on Windows: the byte at 1 MiB, or any of the 16
// lease bytes after it, held by another handle is a held lock; the bytes
// before it (the holder's record) and after the leases are not the lock.
func TestCheckoutLockByteRange(t *testing.T) {
	path := filepath.Join(tempDir(t), ".hermes-update.lock")
	state, _ := ProbeCheckoutLock(path, false)
	assert.Equal(t, LockFree, state, "no file")
	require.NoError(t, os.WriteFile(path, []byte("1\n2\n"), 0o644))
	state, _ = ProbeCheckoutLock(path, false)
	assert.Equal(t, LockFree, state)

	for _, tc := range []struct {
		name   string
		off, n uint32
		want   LockState
	}{
		{"the lock byte", CheckoutLockOffset, 1, LockHeld},
		{"the first lease byte", CheckoutLockOffset + 1, 1, LockHeld},
		{"the last lease byte", CheckoutLockOffset + CheckoutLeaseBytes, 1, LockHeld},
		{"the record", 0, 4, LockFree},
		{"past the leases", CheckoutLockOffset + CheckoutLeaseBytes + 1, 1, LockFree},
	} {
		unlock := lockBytes(t, path, tc.off, tc.n)
		state, why := ProbeCheckoutLock(path, false)
		unlock()
		assert.Equal(t, tc.want, state, "%s: %s", tc.name, why)
	}

	held, err := LockCheckout(path, 0)
	require.NoError(t, err)
	state, _ = ProbeCheckoutLock(path, false)
	assert.Equal(t, LockHeld, state, "held by LockCheckout")
	_, err = LockCheckout(path, 0)
	assert.ErrorIs(t, err, ErrCheckoutLocked)
	require.NoError(t, held.Close())
	state, _ = ProbeCheckoutLock(path, false)
	assert.Equal(t, LockFree, state, "released")
}
