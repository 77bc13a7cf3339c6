//go:build unix

package gitread

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// A FIFO where git keeps a table or tables.list is refused at once (git
// itself would wait on it for a writer).
func TestReftableSpecialFiles(t *testing.T) {
	runDamageCases(t, []damageCase{
		{"a table that is a FIFO", "sha1", func(t *testing.T, rt string) {
			p := tablePaths(t, rt)[0]
			require.NoError(t, os.Remove(p))
			gittest.Mkfifo(t, p)
		}, true},
		{"tables.list a FIFO", "sha1", func(t *testing.T, rt string) {
			p := filepath.Join(rt, "tables.list")
			require.NoError(t, os.Remove(p))
			gittest.Mkfifo(t, p)
		}, true},
	})
}
