//go:build unix

package gittest

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Mkfifo makes a FIFO at path.
func Mkfifo(tb testing.TB, path string) {
	tb.Helper()
	if err := unix.Mkfifo(path, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// Mksocket makes a Unix domain socket at path; it stays until the test
// ends. It is bound at a short path and renamed into place: socket
// addresses are limited to about a hundred bytes.
func Mksocket(tb testing.TB, path string) {
	tb.Helper()
	dir, err := os.MkdirTemp("", "sock")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		tb.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	tb.Cleanup(func() { l.Close() })
	if err := os.Rename(filepath.Join(dir, "s"), path); err != nil {
		tb.Fatal(err)
	}
}

// Release makes the release name under root (root/releases/name), an
// install holding run_agent.py and a build stamp naming commit (none where
// it is empty), and returns its directory.
func Release(tb testing.TB, root, name, commit string) string {
	tb.Helper()
	dir := filepath.Join(root, "releases", name)
	Install(tb, dir, commit)
	return dir
}

// Flip points the link at path to target, as a deploy publishes a
// release (Capistrano, git-sync): a new link beside it, renamed over it.
func Flip(tb testing.TB, link, target string) {
	tb.Helper()
	tmp := link + ".tmp"
	if err := os.Symlink(target, tmp); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		tb.Fatal(err)
	}
}
