package fsread

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// The open of a read without following opens a link itself: a link
// swapped in between the lstat and the open is then of the wrong type,
// never the file it names.
func TestOpenNoFollowOpensTheLink(t *testing.T) {
	dir := gittest.TempDir(t)
	target := filepath.Join(dir, "target")
	gittest.WriteFile(t, target, "data")
	link := filepath.Join(dir, "link")
	symlink(t, target, link)
	f, err := openNoFollow(link)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&fs.ModeSymlink, "openNoFollow(%q) opened %v, want the link", link, fi.Mode())
	_, _, err = readOpened(link, f, fi, 100)
	assert.True(t, IsLinkLoop(err), "readOpened of the link = %v, want a symbolic link refused", err)
}

// A file open for a read, followed or not, does not stop a writer that
// deletes it (as an updater clearing its marker, or a writer that deletes
// a file before it renames another to its name): the read shares it for
// deletes, which os.Open does not.
func TestOpenFileMayBeDeleted(t *testing.T) {
	for _, nofollow := range []bool{false, true} {
		dir := gittest.TempDir(t)
		ref := filepath.Join(dir, "main")
		gittest.WriteFile(t, ref, "1111111111111111111111111111111111111111\n")
		r, st, err := OpenRegular(ref, 1<<20, nofollow)
		require.NoError(t, err)
		require.NotNil(t, r, "%v", st)
		assert.NoError(t, os.Remove(ref), "a delete of the file while it is open (nofollow %v)", nofollow)
		require.NoError(t, r.Close())
	}
}
