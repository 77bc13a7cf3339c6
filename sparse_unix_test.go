//go:build unix

package runtimeguard

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// sparseSize is the size a Git file is truncated to: a sparse file of
// zeros, which git refuses too.
const sparseSize = 256 << 20

// A sparse regular file at the index or packed-refs (truncated to 256
// MiB: zeros, or zeros after its content) makes every check stale, as git
// fails there too, and no check reads it whole: its ends say it cannot be
// one (no DIRC signature; a last line not terminated), so no check
// allocates near the
// bound of 64 MiB, and once the failure is settled a check stats the files
// it depends on and reads nothing.
//
// (An index grown with zeros after its content has no such tell: the
// first check after it changed reads it whole, later ones do not. Whether
// git refuses it depends on the bytes of its old checksum, which it then
// takes for an extension, so no case here relies on it.)
func TestSparseGitFileIsNotReadOnEveryCheck(t *testing.T) {
	for _, c := range []struct {
		name, layout, rel string
		zeros             bool     // truncated to 0 first: nothing but zeros
		git               []string // a git command that fails with it
	}{
		{"index of zeros", "loose", filepath.Join(".git", "index"), true, []string{"ls-files", "--error-unmatch", "run_agent.py"}},
		{"packed-refs of zeros", "packed", filepath.Join(".git", "packed-refs"), true, []string{"rev-parse", "HEAD"}},
		{"packed-refs grown with zeros", "packed", filepath.Join(".git", "packed-refs"), false, []string{"rev-parse", "HEAD"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, module := specialCheckout(t, c.layout)
			g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, settledEnv())
			require.NoError(t, err)
			require.NoError(t, g.EnsureCurrent())
			if c.zeros {
				require.NoError(t, os.Truncate(filepath.Join(dir, c.rel), 0))
			}
			require.NoError(t, os.Truncate(filepath.Join(dir, c.rel), sparseSize))
			out, err := gittest.Command(dir, c.git...).CombinedOutput()
			require.Error(t, err, "git %v answers with a sparse %s: %s", c.git, c.name, out)

			const checks = 20
			var first, most, total uint64
			for i := 0; i < checks; i++ {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
				runtime.ReadMemStats(&after)
				n := after.TotalAlloc - before.TotalAlloc
				if i == 0 {
					first = n
					continue
				}
				most, total = max(most, n), total+n
			}
			t.Logf("the first check allocated %d bytes; the %d after it %d at most, %d on average", first, checks-1, most, total/(checks-1))
			assert.Less(t, first, uint64(64<<20), "what the first check allocated")
			assert.Less(t, most, uint64(1<<20), "the most a later check allocated")
		})
	}
}
