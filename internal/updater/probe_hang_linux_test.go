package updater

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fusehang"
)

// A checkout lock on a file system that stops answering holds up no probe
// of another lock: a probe blocked in the open of the hung lock file holds
// nothing the other probes wait for (probes are serialized per lock path,
// and never across the open). Every guard of the process probes through
// here, so one guard's hung lock file must not stall another's.
func TestProbeOfAHungLockHoldsUpNoOther(t *testing.T) {
	mnt := filepath.Join(tempDir(t), "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	f := fusehang.Mount(t, mnt, map[string]string{"git": tempDir(t)})
	hung := filepath.Join(f.Dir, "git", HermesCheckoutLock)
	f.Hang()
	go ProbeCheckoutLock(hung, false) // returns once the mount is torn down
	require.Eventually(t, func() bool { return f.Pending() > 0 }, 10*time.Second, time.Millisecond, "the probe never reached the hung file system")

	other := filepath.Join(tempDir(t), HermesCheckoutLock)
	writeFile(t, other, "")
	probed := make(chan LockState, 1)
	go func() {
		state, _ := ProbeCheckoutLock(other, false)
		probed <- state
	}()
	select {
	case state := <-probed:
		assert.Equal(t, LockFree, state)
	case <-time.After(10 * time.Second):
		t.Fatal("the probe of a lock that answers waited for the probe of a hung one")
	}
}
