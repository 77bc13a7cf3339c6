package fsread

import (
	"io/fs"
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
