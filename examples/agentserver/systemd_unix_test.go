//go:build unix

package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notifySocket is a service manager's notification socket in a temporary
// directory; next returns the next message's lines, with
// MONOTONIC_USEC's value left out.
func notifySocket(t *testing.T) (name string, next func() []string) {
	t.Helper()
	name = filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return name, func() []string {
		t.Helper()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(60*time.Second)))
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		require.NoError(t, err, "a message to the service manager")
		lines := strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n")
		for i, l := range lines {
			if v, ok := strings.CutPrefix(l, "MONOTONIC_USEC="); ok {
				assert.NotEmpty(t, v)
				lines[i] = "MONOTONIC_USEC="
			}
		}
		return lines
	}
}

// activate starts the server as a service manager does with socket
// activation: two listening sockets the test holds become descriptors 3
// and 4, named "admin" and "http" as FileDescriptorName= names them, and
// LISTEN_PID names the server's process (a shell sets it to its own ID,
// then execs the server, keeping it). It returns the address of the one
// named http, which the server serves.
func activate(t *testing.T, d *deployment) string {
	t.Helper()
	var files []*os.File
	var addr string
	for range 2 {
		ln, f := gittest.ListenerFile(t)
		files, addr = append(files, f), ln.Addr().String()
	}
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	d.prepare = func(cmd *exec.Cmd) {
		cmd.Args = []string{"sh", "-c", `LISTEN_PID=$$ exec "$0"`, cmd.Path}
		cmd.Path = sh
		cmd.Env = append(cmd.Env, "LISTEN_FDS=2", "LISTEN_FDNAMES=admin:http")
		cmd.ExtraFiles = files
	}
	return addr
}

// The messages a service manager gets from the server, in order, across an
// update made with runtimeguard update: ready on the old code, a reload
// asked for acknowledged, reloading (with its time), ready on the new
// code, stopping. And the same when the manager passed the listening
// socket.
func TestServiceManagerEndToEnd(t *testing.T) {
	for _, mode := range []string{reloadInProcess, reloadExec} {
		for _, activated := range []bool{false, true} {
			name := mode
			if activated {
				name += "/socket-activated"
			}
			t.Run(name, func(t *testing.T) {
				d := newDeployment(t)
				sock, next := notifySocket(t)
				held := ""
				if activated {
					held = activate(t, d)
				}
				d.start(t, mode, "NOTIFY_SOCKET="+sock)
				if activated {
					require.Equal(t, held, d.addr, "the server serves the socket named http")
				}
				old, ahead := d.loaded[:12], d.ahead[:12]
				assert.Equal(t, []string{"READY=1", "STATUS=serving " + old}, next())
				for _, path := range []string{"/livez", "/readyz"} {
					resp, err := http.Get("http://" + d.addr + path)
					require.NoError(t, err)
					resp.Body.Close()
					assert.Equal(t, http.StatusOK, resp.StatusCode, path)
				}

				// systemctl reload: acknowledged, nothing loaded, and the
				// status line left as it was, naming the revision served.
				require.NoError(t, d.server.Process.Signal(syscall.SIGHUP))
				assert.Equal(t, []string{"RELOADING=1", "MONOTONIC_USEC="}, next())
				assert.Equal(t, []string{"READY=1"}, next())

				c := d.client(t)
				c.until(t, "from the old code", func(a answer) bool { return a.revision == d.loaded })
				d.update(t, "git", "pull", "-q", "--ff-only")
				msg := next()
				if msg[0] != "RELOADING=1" { // the move was seen before the receipt was written
					assert.Equal(t, []string{"STATUS=serving " + old + ", stale: the checkout moved; reloading once the update is proven"}, msg)
					msg = next()
				}
				assert.Equal(t, []string{"RELOADING=1", "MONOTONIC_USEC=", "STATUS=reloading " + old + " to " + ahead}, msg)
				ready := []string{"READY=1", "STATUS=serving " + ahead + ", reloaded from " + old}
				if mode == reloadExec {
					ready = []string{"READY=1", "STATUS=serving " + ahead} // the new image's
				}
				assert.Equal(t, ready, next())
				c.until(t, "from the new code", func(a answer) bool { return a.revision == d.ahead })
				answers := c.finish()
				olds, _, news := phases(t, answers, d.loaded, d.ahead)
				assert.Positive(t, olds)
				assert.Positive(t, news)
				for _, a := range answers {
					if a.status == http.StatusOK {
						assert.Equal(t, float64(d.pid), a.pid, "the same process serves, before and after")
					}
				}

				require.NoError(t, d.server.Process.Signal(syscall.SIGTERM))
				assert.Equal(t, []string{"STOPPING=1", "STATUS=stopping"}, next())
			})
		}
	}
}
