package systemd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// No NOTIFY_SOCKET: no notifier, and a nil one sends nothing.
func TestNotifyWithoutASocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n, err := FromEnv()
	require.NoError(t, err)
	assert.Nil(t, n)
	assert.NoError(t, n.Ready("x"))
	assert.NoError(t, n.Reloading("x"))
	assert.NoError(t, n.Stopping("x"))
	assert.NoError(t, n.SetStatus("x"))
}

// Addresses other than a path or an abstract name are refused.
func TestNotifyAddresses(t *testing.T) {
	for _, bad := range []string{"vsock:2:1234", "run/notify", "@"} {
		t.Setenv("NOTIFY_SOCKET", bad)
		n, err := FromEnv()
		assert.Error(t, err, bad)
		assert.Nil(t, n, bad)
	}
}
