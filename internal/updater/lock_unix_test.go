//go:build unix

package updater

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/durable"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// linkAt puts a link at name to a file target elsewhere that holds
// "keep\n" (a dangling link where dangling), and returns the target.
func linkAt(t *testing.T, name string, dangling bool) string {
	t.Helper()
	target := filepath.Join(tempDir(t), "target")
	if !dangling {
		writeFile(t, target, "keep\n")
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o755))
	require.NoError(t, os.Symlink(target, name))
	return target
}

// untouched requires that target is as linkAt left it: its bytes, or
// nothing where the link dangled.
func untouched(t *testing.T, target string, dangling bool) {
	t.Helper()
	if dangling {
		assert.NoFileExists(t, target, "a file was made where the link leads")
		return
	}
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep\n", string(data), "the file the link leads to was changed")
}

// A lock file is never opened, created or truncated through a link at its
// name, whatever the lock: the layout's lock (shared for a plan,
// exclusive for an updater), the checkout lock an updater takes; a link
// there is an error, and the file it leads to stays as it was, or is not
// made where it dangles.
func TestLocksNeverThroughALink(t *testing.T) {
	takes := map[string]func(path string) error{
		"a plan's shared lock": func(p string) error { f, err := Lock("", p, false); closeIf(f); return err },
		"an updater's lock":    func(p string) error { f, err := Lock("", p, true); closeIf(f); return err },
		"the checkout lock":    func(p string) error { f, err := LockCheckout(p, 0); closeIf(f); return err },
		"the claim of a marker": func(p string) error {
			d, err := durable.OpenIn("", filepath.Dir(p), false)
			if err != nil {
				return err
			}
			defer d.Close()
			unlock, err := lockMarker(d, strings.TrimSuffix(filepath.Base(p), MarkerLockSuffix), nil)
			callIf(unlock)
			return err
		},
	}
	for name, take := range takes {
		for _, dangling := range []bool{false, true} {
			t.Run(name+map[bool]string{false: ", a link to a file", true: ", a dangling link"}[dangling], func(t *testing.T) {
				path := filepath.Join(tempDir(t), "update.lock")
				target := linkAt(t, path, dangling)
				assert.Error(t, take(path))
				untouched(t, target, dangling)
			})
		}
	}
}

func closeIf(f *os.File) {
	if f != nil {
		f.Close()
	}
}

func callIf(f func()) {
	if f != nil {
		f()
	}
}

// A FIFO or a directory at a lock's name is refused at once, never waited
// on.
func TestLocksRefuseSpecialFiles(t *testing.T) {
	dir := tempDir(t)
	fifo := filepath.Join(dir, "fifo.lock")
	gittest.Mkfifo(t, fifo)
	sub := filepath.Join(dir, "dir.lock")
	require.NoError(t, os.Mkdir(sub, 0o755))
	for _, p := range []string{fifo, sub} {
		_, err := Lock("", p, false)
		assert.Error(t, err, p)
		_, err = LockCheckout(p, 0)
		assert.Error(t, err, p)
		state, why := ProbeCheckoutLock(p, false)
		assert.Equal(t, LockUnknown, state, "%s: %s", p, why)
	}
}

// A plan's shared lock needs only read access: the lock file is opened
// for reading alone, so a server that may read the file but not write it
// still takes the lock; an updater's exclusive lock still excludes it.
func TestSharedLockNeedsOnlyRead(t *testing.T) {
	path := filepath.Join(tempDir(t), "update.lock")
	f, err := Lock("", path, false)
	require.NoError(t, err)
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	require.NoError(t, err)
	assert.Equal(t, unix.O_RDONLY, flags&unix.O_ACCMODE, "the shared lock's file is open for reading alone")
	_, err = Lock("", path, true)
	assert.ErrorIs(t, err, ErrLocked)
	f.Close()

	require.NoError(t, os.Chmod(path, 0o444))
	if os.Geteuid() != 0 { // root may write any file: the mode proves nothing then
		f, err := Lock("", path, false)
		require.NoError(t, err, "a read-only lock file")
		f.Close()
	}
}
