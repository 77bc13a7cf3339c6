package gittest

import (
	"net"
	"os"
	"testing"
)

// ListenerFile is a TCP listener on the loopback interface and a copy of
// its descriptor, to pass to a process; both are closed when the test
// ends.
func ListenerFile(tb testing.TB) (*net.TCPListener, *os.File) {
	tb.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	f, err := ln.File()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return ln, f
}
