//go:build unix

package runtimeguard

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clearHandoverEnv unsets the handover's variables for the test, and
// restores them after.
func clearHandoverEnv(t *testing.T) {
	for _, v := range handoverEnv {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
}

func handoverEnvLeft() []string {
	var left []string
	for _, v := range handoverEnv {
		if _, ok := os.LookupEnv(v); ok {
			left = append(left, v)
		}
	}
	return left
}

// Inherit takes a handover only for this process, and unsets its
// variables whatever it finds.
func TestInherit(t *testing.T) {
	clearHandoverEnv(t)
	in, err := Inherit()
	assert.NoError(t, err)
	assert.Nil(t, in, "no handover")

	t.Setenv(handoverPIDEnv, strconv.Itoa(os.Getppid()))
	t.Setenv(handoverRevisionEnv, "abc")
	in, err = Inherit()
	assert.NoError(t, err)
	assert.Nil(t, in, "a handover for another process")
	assert.Empty(t, handoverEnvLeft())

	t.Setenv(handoverPIDEnv, strconv.Itoa(os.Getpid()))
	in, err = Inherit()
	assert.Error(t, err, "no revision")
	assert.Nil(t, in)
	assert.Empty(t, handoverEnvLeft())

	t.Setenv(handoverPIDEnv, strconv.Itoa(os.Getpid()))
	t.Setenv(handoverRevisionEnv, "abc")
	t.Setenv(handoverFDsEnv, "1x")
	in, err = Inherit()
	assert.Error(t, err, "a malformed descriptor")
	assert.Nil(t, in)

	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer ln.Close()
	// The descriptor is handed over as an exec hands it: a number that
	// nothing else in the process owns, which Inherit takes (and closes).
	// An *os.File's own descriptor would be closed twice, the second
	// time by its finalizer, on whatever file has its number by then.
	f, err := ln.File()
	require.NoError(t, err)
	fd, err := syscall.Dup(int(f.Fd()))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	t.Setenv(handoverPIDEnv, strconv.Itoa(os.Getpid()))
	t.Setenv(handoverRevisionEnv, "abc")
	t.Setenv(handoverReceiptEnv, "update_id:u1")
	t.Setenv(handoverFDsEnv, strconv.Itoa(fd))
	in, err = Inherit()
	require.NoError(t, err)
	require.Len(t, in.Listeners, 1)
	defer in.Listeners[0].Close()
	assert.Equal(t, "abc", in.ExpectRevision)
	assert.Equal(t, "update_id:u1", in.ExpectReceipt)
	assert.Equal(t, ln.Addr().String(), in.Listeners[0].Addr().String(), "the same socket")
	assert.Empty(t, handoverEnvLeft())
	in.Release()
	in.Release()
}

// A handover whose host could not quiesce resumes serving on the same
// sockets (the host's own listeners closed): a client connects as
// before, and nothing was executed.
func TestExecHandoverResumesOnTheSameSockets(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	plan, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer plan.Release()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	resumed := make(chan []net.Listener, 1)
	h := &ExecHandover{
		Listeners: []net.Listener{ln},
		Quiesce: func(context.Context) error {
			ln.Close() // the host stops accepting
			return errors.New("a connection did not end")
		},
		Resume: func(lns []net.Listener) error {
			resumed <- lns
			return nil
		},
	}
	err = h.Handover(context.Background(), plan)
	require.ErrorContains(t, err, "a connection did not end")
	lns := <-resumed
	require.Len(t, lns, 1)
	defer lns[0].Close()
	assert.Equal(t, ln.Addr().String(), lns[0].Addr().String())
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err, "the socket stayed open")
	defer conn.Close()
	accepted, err := lns[0].Accept()
	require.NoError(t, err)
	accepted.Close()
}

// A Unix socket's path is kept across the handover: closing the host's
// listener does not unlink it.
func TestExecHandoverKeepsAUnixSocketsPath(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	plan, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer plan.Release()
	path := t.TempDir() + "/s"
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	h := &ExecHandover{
		Listeners: []net.Listener{ln},
		Quiesce:   func(context.Context) error { ln.Close(); return errors.New("stop here") },
		Resume: func(lns []net.Listener) error {
			for _, l := range lns {
				l.Close()
			}
			return nil
		},
	}
	require.Error(t, h.Handover(context.Background(), plan))
	_, err = os.Stat(path)
	assert.NoError(t, err, "the socket's path is still there")
}
