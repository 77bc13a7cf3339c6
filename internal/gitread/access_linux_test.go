//go:build linux

package gitread

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// What git asks of objects and refs, access(2) for X_OK, answers for more
// than the files: a mount made noexec under an objects that is an
// executable file (which git takes) changes what it says and no stamp.
// The dependencies of a read are then no longer unchanged, as git then
// finds no repository. (A server that drops its credentials is the
// other case: TestAccessAfterCredentialsDropped.)

func TestDepsSeeANoexecMountUnderAnExecutableObjectsFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a bind mount needs root")
	}
	gittest.Need(t)
	dir := filepath.Join(t.TempDir(), "repo")
	gittest.Init(t, dir, map[string]string{"run_agent.py": "x\n"})
	gitDir := filepath.Join(dir, ".git")
	objects := filepath.Join(gitDir, "objects")
	require.NoError(t, os.RemoveAll(objects))
	require.NoError(t, os.WriteFile(objects, nil, 0o755))
	_, deps, err := Read(System, filepath.Join(dir, "run_agent.py"), true)
	require.NoError(t, err, "git takes an executable file as objects")
	before, err := fsread.StatStamp(objects)
	require.NoError(t, err)

	unlock := gittest.LockMounts(t)
	bound := unix.Mount(gitDir, gitDir, "", unix.MS_BIND, "")
	remounted := bound
	if bound == nil {
		remounted = unix.Mount("", gitDir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOEXEC, "")
		t.Cleanup(func() {
			defer gittest.LockMounts(t)()
			_ = unix.Unmount(gitDir, unix.MNT_DETACH)
		})
	}
	unlock()
	if bound != nil {
		t.Skipf("no bind mount here: %v", bound)
	}
	require.NoError(t, remounted)
	after, err := fsread.StatStamp(objects)
	require.NoError(t, err)
	require.Equal(t, before, after, "the remount moves no stamp")
	require.False(t, fsread.Searchable(objects, after))
	out, err := gittest.Command(dir, "rev-parse", "--verify", "HEAD").CombinedOutput()
	require.Error(t, err, "git on the noexec mount: %s", out)
	assert.False(t, deps.Unchanged(System), "the dependencies once git finds no repository")
}
