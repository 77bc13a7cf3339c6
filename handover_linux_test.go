package runtimeguard

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An exec that fails says which program it could not execute, and the
// host resumes on the same sockets. (An environment variable longer than
// Linux's MAX_ARG_STRLEN makes execve fail with E2BIG before it replaces
// anything.)
func TestExecHandoverNamesTheProgramItCouldNotExecute(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	plan, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer plan.Release()
	exe, err := os.Executable()
	require.NoError(t, err)
	t.Setenv("RUNTIMEGUARD_TEST_TOO_LONG", strings.Repeat("x", 4<<20))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	resumed := make(chan []net.Listener, 1)
	h := &ExecHandover{
		Listeners: []net.Listener{ln},
		Quiesce:   func(context.Context) error { return ln.Close() },
		Resume: func(lns []net.Listener) error {
			resumed <- lns
			return nil
		},
	}
	err = h.Handover(context.Background(), plan)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exec "+exe+": ")
	assert.True(t, errors.Is(err, errTooBig), "%v", err)
	lns := <-resumed
	require.Len(t, lns, 1)
	lns[0].Close()
}

// errTooBig is execve's error for arguments and environment beyond its
// limits.
var errTooBig = syscall.E2BIG
