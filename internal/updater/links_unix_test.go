//go:build unix

package updater

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/durable"
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
			unlock, err := lockMarker(d, strings.TrimSuffix(filepath.Base(p), MarkerLockSuffix))
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
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
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

// The probe of the checkout lock never opens a link at the lock's name:
// a link there proves nothing (unknown), even to a lock another holds;
// only the updater's own path (Also) is probed through a link, as the
// updater opens it.
func TestProbeCheckoutLockOfALink(t *testing.T) {
	path := filepath.Join(tempDir(t), "hermes-update.lock")
	target := linkAt(t, path, false)
	holder, err := Lock("", target, true)
	require.NoError(t, err)
	defer holder.Close()
	state, why := ProbeCheckoutLock(path, false)
	assert.Equal(t, LockUnknown, state, why)
	state, why = ProbeCheckoutLock(path, true)
	assert.Equal(t, LockHeld, state, why)
	untouched(t, target, false)
}

// The writer's files are never written through a link: with a link at the
// marker's name, at its sidecar lock's, at the layout's lock, at the
// checkout lock, or in place of the receipts' directory, Run refuses
// before its command runs, and the file the link leads to stays as it was
// (or is not made); a link at the latest receipt's name is replaced by the
// receipt, not written through.
func TestRunNeverWritesThroughALink(t *testing.T) {
	refusals := map[string]func(c *runCase, u *Update) string{
		"the marker":        func(c *runCase, u *Update) string { return c.marker() },
		"the sidecar lock":  func(c *runCase, u *Update) string { return c.marker() + MarkerLockSuffix },
		"the layout's lock": func(c *runCase, u *Update) string { return u.Lock },
		"the checkout lock": func(c *runCase, u *Update) string {
			u.CheckoutLock = filepath.Join(c.dir, ".git", HermesCheckoutLock)
			return u.CheckoutLock
		},
		"the receipts' directory": func(c *runCase, u *Update) string { return filepath.Join(c.home, "logs") },
	}
	for name, at := range refusals {
		for _, dangling := range []bool{false, true} {
			t.Run(name+map[bool]string{false: ", a link to a file", true: ", a dangling link"}[dangling], func(t *testing.T) {
				c := newRunCase(t)
				ran := filepath.Join(tempDir(t), "ran")
				u := c.update(t, "touch", ran)
				target := linkAt(t, at(c, &u), dangling)
				_, err := System.Run(context.Background(), u)
				assert.Error(t, err, c.stderr.String())
				assert.NoFileExists(t, ran, "the command ran")
				untouched(t, target, dangling)
			})
		}
	}
	t.Run("the receipts' directory, a link to a directory", func(t *testing.T) {
		c := newRunCase(t)
		elsewhere := tempDir(t)
		require.NoError(t, os.MkdirAll(c.home, 0o755))
		require.NoError(t, os.Symlink(elsewhere, filepath.Join(c.home, "logs")))
		ran := filepath.Join(tempDir(t), "ran")
		_, err := System.Run(context.Background(), c.update(t, "touch", ran))
		assert.Error(t, err, c.stderr.String())
		assert.NoFileExists(t, ran, "the command ran")
		assert.NoDirExists(t, filepath.Join(elsewhere, "update_receipts"), "made where the link leads")
	})
	t.Run("the latest receipt", func(t *testing.T) {
		c := newRunCase(t)
		target := linkAt(t, c.receipt(), false)
		res, err := System.Run(context.Background(), c.update(t, "true"))
		require.NoError(t, err, c.stderr.String())
		assert.Empty(t, res.Failure)
		untouched(t, target, false)
		fi, err := os.Lstat(c.receipt())
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "the receipt replaced the link")
	})
}

// A directory of the home replaced by a link while the command runs: the
// final receipt, the prune of old receipts, and the release of a marker
// kept in a directory of the home are made where the directories opened
// from the home lead, never where the link leads; the files there stay as
// they were, none made, none removed.
func TestRunWritesNothingWhereALinkSwappedInLeads(t *testing.T) {
	for _, tc := range []struct {
		name   string
		marker string // the marker, relative to the home
		swap   string // the directory replaced, relative to the home
	}{
		{"the receipts' directory", markerName, filepath.Join("logs", "update_receipts")},
		{"the logs directory", markerName, "logs"},
		{"the marker's directory", filepath.Join("run", markerName), "run"},
		{"the home itself", markerName, "."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRunCase(t)
			victim := tempDir(t)
			old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			var precious []string
			for i := range 25 {
				name := fmt.Sprintf("update_%02d.json", i)
				writeFile(t, filepath.Join(victim, name), "precious\n")
				require.NoError(t, os.Chtimes(filepath.Join(victim, name), old, old.Add(time.Duration(i)*time.Second)))
				precious = append(precious, name)
			}
			swapped := filepath.Join(c.home, tc.swap)
			u := c.update(t, "sh", "-c", `mv "$1" "$1.old" && ln -s "$2" "$1"`, "sh", swapped, victim)
			u.Marker = filepath.Join(c.home, tc.marker)
			require.NoError(t, os.MkdirAll(filepath.Dir(u.Marker), 0o755))
			_, _ = System.Run(context.Background(), u)
			entries, err := os.ReadDir(victim)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
				data, err := os.ReadFile(filepath.Join(victim, e.Name()))
				require.NoError(t, err)
				assert.Equal(t, "precious\n", string(data), "%s was written", e.Name())
			}
			assert.ElementsMatch(t, precious, names, "files made or removed where the link leads")
		})
	}
}
