package gitread

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// Settle trusts a read's stamps only once they are old enough, except an
// Identity dep's, which its inode proves; and it marks the Identity deps
// whose whole stamp was old enough, whose access(2) answer a stamp found
// again then proves. A stamp that moved (a directory's entries changed)
// still asks access(2), and a stamp of another file is a change.
func TestSettleTrustsIdentityDepsAndMarksTheSettledOnes(t *testing.T) {
	dir := t.TempDir()
	gittest.Init(t, dir, map[string]string{"run_agent.py": "x\n"})
	_, deps, err := Read(System, filepath.Join(dir, "run_agent.py"), true)
	require.NoError(t, err)
	identity := func(d Deps) (n, settled int) {
		for _, x := range d {
			if x.Identity {
				n++
				if x.settled {
					settled++
				}
			}
		}
		return n, settled
	}
	n, _ := identity(deps)
	require.Equal(t, 2, n, "a Git directory's objects and refs are Identity deps: %+v", deps)

	assert.False(t, deps.Settle(time.Now()), "files just written are not settled")
	_, settled := identity(deps)
	assert.Zero(t, settled, "no Identity dep just written is marked settled")

	onlyIdentity := Deps{}
	for _, d := range deps {
		if d.Identity {
			onlyIdentity = append(onlyIdentity, d)
		}
	}
	assert.True(t, onlyIdentity.Settle(time.Now()), "an Identity dep is trusted by its inode, however recent its stamp")

	later := time.Now().Add(time.Hour)
	assert.True(t, deps.Settle(later), "every stamp is settled an hour later")
	_, settled = identity(deps)
	assert.Equal(t, 2, settled, "both Identity deps are marked settled")
	assert.True(t, deps.Unchanged(System))

	objects := filepath.Join(dir, ".git", "objects")
	require.NoError(t, os.Mkdir(filepath.Join(objects, "ab"), 0o755))
	assert.True(t, deps.Unchanged(System), "a new object directory keeps what is at objects")

	require.NoError(t, os.Chmod(objects, 0o700))
	assert.False(t, deps.Unchanged(System), "a mode changed is a change, settled or not")

	absent := Deps{{Path: filepath.Join(dir, "absent"), Identity: true}}
	assert.True(t, absent.Settle(time.Now()), "nothing at a path is settled")
	assert.False(t, absent[0].settled, "nothing at a path has no change time to prove anything")
}
