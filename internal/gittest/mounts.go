package gittest

import (
	"os/exec"
	"testing"
)

// Mount runs mount(8) with args, whose last is the mount point, under
// the tests' mount lock (see LockMounts), and unmounts it (lazily, under
// the lock) when the test ends. It returns mount's error and output: a
// host that cannot mount (not Linux, not root) is the caller's to skip.
func Mount(tb testing.TB, args ...string) ([]byte, error) {
	tb.Helper()
	unlock := LockMounts(tb)
	out, err := exec.Command("mount", args...).CombinedOutput()
	unlock()
	if err == nil {
		target := args[len(args)-1]
		tb.Cleanup(func() {
			defer LockMounts(tb)()
			_ = exec.Command("umount", "-l", target).Run()
		})
	}
	return out, err
}
