//go:build unix

package systemd

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listenNotify makes the service manager's side: a datagram socket at
// name, and a reader of its messages.
func listenNotify(t *testing.T, name string) func() string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return func() string {
		t.Helper()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		require.NoError(t, err)
		return string(buf[:n])
	}
}

// The manager's socket gets one datagram per message, each line an
// assignment; a status line with a newline or a terminal's escape in it
// is quoted, as the command line quotes a name: one line, no escape.
func TestNotifyMessages(t *testing.T) {
	name := filepath.Join(t.TempDir(), "notify")
	read := listenNotify(t, name)
	t.Setenv("NOTIFY_SOCKET", name)
	n, err := FromEnv()
	require.NoError(t, err)
	require.NotNil(t, n)

	require.NoError(t, n.Ready("serving abc123"))
	assert.Equal(t, "READY=1\nSTATUS=serving abc123\n", read())
	require.NoError(t, n.SetStatus("stale:\nwaiting"))
	assert.Equal(t, "STATUS=\"stale:\\nwaiting\"\n", read())
	require.NoError(t, n.Ready("serving, the receipt update_\x1b[2J\x1b[31mred.json"))
	assert.Equal(t, "READY=1\nSTATUS=\"serving, the receipt update_\\x1b[2J\\x1b[31mred.json\"\n", read())
	require.NoError(t, n.Send("STATUS=a host's\rline\x00"))
	assert.Equal(t, "STATUS=\"a host's\\rline\\x00\"\n", read())
	require.NoError(t, n.Stopping(""))
	assert.Equal(t, "STOPPING=1\n", read())
	assert.Error(t, n.Send("READY=1\nSTOPPING=1"), "an assignment is one line")
	assert.Error(t, n.Send("READY"), "an assignment has a value")
}

// A socket nobody listens on is an error of the send, not a hang.
func TestNotifyNobodyListens(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone"))
	n, err := FromEnv()
	require.NoError(t, err)
	assert.Error(t, n.Ready("x"))
}
