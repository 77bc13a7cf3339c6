package gittest

import (
	"errors"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// FullDatagramSocket makes, at name, a datagram socket that reads
// nothing, and fills its queue, as a service manager that is stuck leaves
// its notification socket: datagrams from sockets of their own until a
// fresh socket finds no room for one. It stays until the test ends.
func FullDatagramSocket(tb testing.TB, name string) {
	tb.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	for range 100000 {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			tb.Fatal(err)
		}
		sent := 0
		for {
			err := unix.Sendto(fd, []byte("x"), 0, &unix.SockaddrUnix{Name: name})
			if errors.Is(err, unix.EAGAIN) {
				break
			}
			if err != nil {
				unix.Close(fd)
				tb.Fatal(err)
			}
			sent++
		}
		unix.Close(fd) // what it sent stays queued
		if sent == 0 {
			return
		}
	}
	tb.Fatalf("the queue of %s did not fill", name)
}
