package durable

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := gittest.TempDir(t)
	path := filepath.Join(dir, "state.json")
	require.NoError(t, WriteFile(path, []byte("one\n"), 0o600))
	require.NoError(t, WriteFile(path, []byte("two\n"), 0o644))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "two\n", string(data))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	if os.PathSeparator == '/' {
		assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "a temporary file was left behind")
}

// A failed write leaves the old file as it was and no temporary file.
func TestWriteFileFailureLeavesOldContent(t *testing.T) {
	dir := gittest.TempDir(t)
	path := filepath.Join(dir, "state.json")
	require.NoError(t, WriteFile(path, []byte("kept\n"), 0o644))
	// The rename fails: a directory is in the way of the target name.
	blocked := filepath.Join(dir, "blocked")
	require.NoError(t, os.MkdirAll(filepath.Join(blocked, "child"), 0o755))
	assert.Error(t, WriteFile(blocked, []byte("x"), 0o644))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "kept\n", string(data))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "a temporary file was left behind: %v", entries)
}

// A directory that does not exist is an error, not a file somewhere else.
func TestWriteFileMissingDirectory(t *testing.T) {
	assert.Error(t, WriteFile(filepath.Join(gittest.TempDir(t), "no", "such", "file"), nil, 0o644))
}

// CreateFile writes a file that is not there, refuses one that is, and of
// many processes creating the same path at once exactly one succeeds.
func TestCreateFileIsExclusive(t *testing.T) {
	dir := gittest.TempDir(t)
	path := filepath.Join(dir, "marker")
	require.NoError(t, CreateFile(path, []byte("first\n"), 0o644))
	err := CreateFile(path, []byte("second\n"), 0o644)
	require.ErrorIs(t, err, fs.ErrExist)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "first\n", string(data))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "a temporary file was left behind: %v", entries)

	for round := 0; round < 20; round++ {
		path := filepath.Join(dir, fmt.Sprint("race", round))
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := CreateFile(path, []byte(fmt.Sprintln(i)), 0o644)
				if err == nil {
					wins.Add(1)
				} else {
					assert.ErrorIs(t, err, fs.ErrExist)
				}
			}()
		}
		wg.Wait()
		require.Equal(t, int32(1), wins.Load(), "round %d", round)
	}
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 21, "a temporary file was left behind")
}

// symlink makes a link at name to target, or skips the test where this
// platform lets no test make one.
func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Skipf("no symbolic link: %v", err)
	}
	if _, err := os.Lstat(name); err != nil {
		// Wine 8 reports success from CreateSymbolicLink but makes nothing.
		t.Skipf("this host reported a symbolic link it did not make: %v", err)
	}
}

// A directory below the root is opened without following a link: a link
// on the way (to a directory, or dangling) is an error, and nothing is
// made where it leads; the root itself may be a link.
func TestOpenInFollowsNoLinkBelowTheRoot(t *testing.T) {
	tmp := gittest.TempDir(t)
	victim := filepath.Join(tmp, "victim")
	require.NoError(t, os.Mkdir(victim, 0o755))
	home := filepath.Join(tmp, "home")
	require.NoError(t, os.MkdirAll(filepath.Join(home, "logs"), 0o755))
	symlink(t, victim, filepath.Join(home, "logs", "receipts"))
	symlink(t, filepath.Join(tmp, "nowhere"), filepath.Join(home, "run"))
	for _, dir := range []string{filepath.Join(home, "logs", "receipts"), filepath.Join(home, "logs", "receipts", "x"), filepath.Join(home, "run")} {
		for _, create := range []bool{false, true} {
			_, err := OpenIn(home, dir, create)
			assert.ErrorContains(t, err, "symbolic link, not a directory", "%s, create %v", dir, create)
		}
	}
	entries, err := os.ReadDir(victim)
	require.NoError(t, err)
	assert.Empty(t, entries, "made where the link leads")
	assert.NoDirExists(t, filepath.Join(tmp, "nowhere"))

	// The root given through a link is the caller's choice.
	symlink(t, home, filepath.Join(tmp, "home-link"))
	d, err := OpenIn(filepath.Join(tmp, "home-link"), filepath.Join(tmp, "home-link", "logs", "new"), true)
	require.NoError(t, err)
	require.NoError(t, d.WriteFile("f", []byte("x\n"), 0o644))
	require.NoError(t, d.Close())
	assert.FileExists(t, filepath.Join(home, "logs", "new", "f"))
}

// A directory replaced by a link after it was opened: nothing written
// through the Dir lands where the link leads (on Unix the writes are made
// in the directory opened, renamed away; elsewhere they are refused).
func TestDirWritesNothingWhereALinkSwappedInLeads(t *testing.T) {
	tmp := gittest.TempDir(t)
	home := filepath.Join(tmp, "home")
	dir := filepath.Join(home, "logs", "receipts")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	victim := filepath.Join(tmp, "victim")
	require.NoError(t, os.Mkdir(victim, 0o755))
	writeFile := func(name string) {
		require.NoError(t, os.WriteFile(filepath.Join(victim, name), []byte("precious\n"), 0o644))
	}
	writeFile("old.json")
	writeFile("gone.json")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gone.json"), []byte("mine\n"), 0o644))

	d, err := OpenIn(home, dir, false)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, os.Rename(dir, dir+".old"))
	symlink(t, victim, dir)

	_ = d.WriteFile("latest.json", []byte("new\n"), 0o644)
	_ = d.CreateFile("marker", []byte("new\n"), 0o644)
	_ = d.Rename("old.json", "renamed.json")
	_ = d.Remove("gone.json")
	if f, err := d.OpenFile("update.lock", os.O_RDWR|os.O_CREATE, 0o644); err == nil {
		f.Close()
	}
	names, _ := d.Names(100, func(string) bool { return true })
	assert.NotContains(t, names, "old.json", "the listing is of the directory opened")
	entries, err := os.ReadDir(victim)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	assert.ElementsMatch(t, []string{"gone.json", "old.json"}, got, "written where the link leads")
}

// A pinned root is the directory it was: another made at its path receives
// nothing, where an unpinned root takes whatever directory is there.
func TestPinnedRootRefusesAnotherDirectory(t *testing.T) {
	tmp := gittest.TempDir(t)
	home := filepath.Join(tmp, "home")
	require.NoError(t, os.Mkdir(home, 0o755))
	root, err := PinRoot(home)
	require.NoError(t, err)
	d, err := root.OpenIn(filepath.Join(home, "logs"), true)
	require.NoError(t, err, "the pinned directory itself")
	require.NoError(t, d.WriteFile("a", []byte("a"), 0o644))
	require.NoError(t, d.Close())

	require.NoError(t, os.Rename(home, home+".old"))
	require.NoError(t, os.Mkdir(home, 0o755)) // another directory at the path
	_, err = root.OpenIn(filepath.Join(home, "logs"), true)
	require.ErrorContains(t, err, "no longer the directory")
	entries, err := os.ReadDir(home)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing is made in another directory")

	unpinned := Root{Path: home}
	d, err = unpinned.OpenIn(filepath.Join(home, "logs"), true)
	require.NoError(t, err, "an unpinned root is the directory at its path")
	require.NoError(t, d.Close())
}
