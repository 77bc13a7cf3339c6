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
