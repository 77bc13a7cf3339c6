package fsread

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// ReadNames lists what keep takes of a real directory; refuses one of more
// entries than it reads, whole, whatever keep takes; lists nothing, with
// no error, where nothing is; and refuses a file there.
func TestReadNames(t *testing.T) {
	dir := gittest.TempDir(t)
	for i := range 5 {
		gittest.WriteFile(t, filepath.Join(dir, fmt.Sprintf("update_%d.json", i)), "{}")
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	gittest.WriteFile(t, filepath.Join(dir, ".hidden"), "")
	all := func(string) bool { return true }

	names, err := ReadNames(dir, 7, func(n string) bool { return strings.HasPrefix(n, "update_") })
	require.NoError(t, err)
	slices.Sort(names)
	assert.Equal(t, []string{"update_0.json", "update_1.json", "update_2.json", "update_3.json", "update_4.json"}, names)

	names, err = ReadNames(dir, 7, all)
	require.NoError(t, err)
	assert.Len(t, names, 7, "exactly max entries are listed")

	names, err = ReadNames(dir, 6, func(string) bool { return false })
	require.Error(t, err, "7 entries where 6 are read")
	assert.Contains(t, err.Error(), "more than 6 entries")
	assert.Nil(t, names, "never a part of the listing")

	names, err = ReadNames(filepath.Join(dir, "missing"), 7, all)
	assert.NoError(t, err)
	assert.Empty(t, names)

	_, err = ReadNames(filepath.Join(dir, "update_0.json"), 7, all)
	assert.Error(t, err, "a file is no directory")
}

// A writer may rename the directory being listed, and remove an entry of
// it, while the listing has it open: on Windows, where a directory opened
// without sharing it for deletes refuses both.
func TestReadNamesDirectoryMayBeRenamed(t *testing.T) {
	base := gittest.TempDir(t)
	dir := filepath.Join(base, "receipts")
	require.NoError(t, os.Mkdir(dir, 0o755))
	gittest.WriteFile(t, filepath.Join(dir, "a.json"), "{}")
	gittest.WriteFile(t, filepath.Join(dir, "b.json"), "{}")
	var renamed, removed error
	calls := 0
	_, err := ReadNames(dir, 10, func(string) bool {
		if calls++; calls == 1 {
			removed = os.Remove(filepath.Join(dir, "b.json"))
			renamed = os.Rename(dir, dir+".moved")
		}
		return true
	})
	require.NoError(t, err)
	assert.NoError(t, removed, "an entry removed while its directory is listed")
	assert.NoError(t, renamed, "the directory renamed while it is listed")
}
