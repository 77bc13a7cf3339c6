package runtimeguard

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// notifySocket is a service manager's notification socket in a temporary
// directory, set as NOTIFY_SOCKET; next returns the next message, each
// line an assignment, with MONOTONIC_USEC's value left out.
func notifySocket(t *testing.T) (next func() []string) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", name)
	return func() []string {
		t.Helper()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
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

// Under a Type=notify-reload service manager, a Reloader says it is ready
// on the bound code, that it waits for the update's proof, that it
// reloads (with the time), and that it is ready again on the new code.
func TestNotifyAcrossAReload(t *testing.T) {
	next := notifySocket(t)
	c := newReloaderCase(t, nil)
	assert.Equal(t, []string{"READY=1", "STATUS=serving " + c.loaded[:12]}, next())

	marker := filepath.Join(c.home, hermesMarker)
	writeMarker(t, marker, os.Getpid(), time.Now())
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	assert.Equal(t, []string{"STATUS=serving " + c.loaded[:12] + ", stale: the checkout moved; reloading once the update is proven"}, next())

	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen2-no-id-success.json", c.moved, time.Now())))
	require.NoError(t, os.Remove(marker))
	assert.Equal(t, []string{"RELOADING=1", "MONOTONIC_USEC=", "STATUS=reloading " + c.loaded[:12] + " to " + c.moved[:12]}, next())
	assert.Equal(t, []string{"READY=1", "STATUS=serving " + c.moved[:12] + ", reloaded from " + c.loaded[:12]}, next())
	assert.Equal(t, c.moved, c.get(t, "/").body)
}

// A reload that fails is followed by READY=1 all the same: the old code
// serves on, stale, and the status says so.
func TestNotifyAbandonedReload(t *testing.T) {
	next := notifySocket(t)
	c := newReloaderCase(t, nil)
	c.fail.Store(true)
	assert.Equal(t, "READY=1", next()[0])
	// The update runs under its marker, as the updater's does: its move
	// waits for the proof rather than ask for a manual restart.
	marker := filepath.Join(c.home, hermesMarker)
	writeMarker(t, marker, os.Getpid(), time.Now())
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	assert.Contains(t, next()[0], "reloading once the update is proven")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
	require.NoError(t, os.Remove(marker))
	assert.Equal(t, "RELOADING=1", next()[0])
	assert.Equal(t, []string{"READY=1", "STATUS=serving " + c.loaded[:12] + ", stale: reload abandoned: the restart failed"}, next())
	status := next()
	require.Len(t, status, 1)
	assert.True(t, strings.HasPrefix(status[0], "STATUS=serving "+c.loaded[:12]+", stale: the checkout moved and no reload can follow (no reload is proven safe: a reload was already scheduled on the receipt "), status[0])
	assert.True(t, strings.HasSuffix(status[0], "); restart to load the new code"), status[0])
}

// Notify sends what a host says besides the Reloader, RELOADING=1 with its
// time; without NOTIFY_SOCKET it sends nothing, and fails for nothing.
func TestNotifyByTheHost(t *testing.T) {
	next := notifySocket(t)
	require.NoError(t, Notify("RELOADING=1", "STATUS=reload asked for"))
	assert.Equal(t, []string{"RELOADING=1", "MONOTONIC_USEC=", "STATUS=reload asked for"}, next())
	require.NoError(t, Notify("STOPPING=1"))
	assert.Equal(t, []string{"STOPPING=1"}, next())
	assert.ErrorContains(t, Notify("READY"), "runtimeguard: ")
	// A status is quoted as the command line quotes a name: one line, no
	// terminal escape.
	require.NoError(t, Notify("READY=1", "STATUS=serving\nFORGED=1 \x1b[2J"))
	assert.Equal(t, []string{"READY=1", `STATUS="serving\nFORGED=1 \x1b[2J"`}, next())
	t.Setenv("NOTIFY_SOCKET", "")
	assert.NoError(t, Notify("READY=1"))
}

// A manager that takes no message (its queue full: stuck, or gone and its
// socket left) costs Notify at most its deadline, with an error.
func TestNotifyToAFullQueue(t *testing.T) {
	name := filepath.Join(t.TempDir(), "notify")
	gittest.FullDatagramSocket(t, name)
	t.Setenv("NOTIFY_SOCKET", name)
	done := make(chan error, 1)
	go func() { done <- Notify("READY=1") }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("Notify to a full queue still waits after 10s")
	}
}

// A Reloader never waits on the service manager: with its queue full, a
// proven update is reloaded all the same, and the lost notifications are
// logged once, not once each.
func TestReloaderWithAStuckServiceManager(t *testing.T) {
	name := filepath.Join(t.TempDir(), "notify")
	gittest.FullDatagramSocket(t, name)
	t.Setenv("NOTIFY_SOCKET", name)
	var logs lockedBuffer
	c := newReloaderCaseWith(t, nil, func(o *ReloaderOptions) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
	require.Eventually(t, func() bool { return c.g.Stats().Reloads == 1 }, 10*time.Second, 5*time.Millisecond, "the reload waits on the service manager")
	assert.Equal(t, c.moved, c.get(t, "/").body)
	notTold := func() int {
		n := 0
		for _, l := range logs.lines(t) {
			if strings.HasPrefix(fmt.Sprint(l["msg"]), "runtimeguard: the service manager was not told") {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return notTold() > 0 }, 10*time.Second, 5*time.Millisecond, "a lost notification is logged")
	c.cancel()
	<-c.rl.Done()
	assert.Equal(t, 1, notTold(), "once for the kind of failure: %v", logs.lines(t))
}

// A reload postponed at the drain deadline is followed by READY=1 on the
// old code, whose status says it is postponed (not abandoned: it is tried
// again), and once the work ended, by the reload.
func TestNotifyPostponedReload(t *testing.T) {
	next := notifySocket(t)
	c := newReloaderCaseWith(t, nil, func(o *ReloaderOptions) { o.DrainTimeout = 50 * time.Millisecond })
	var once sync.Once
	free := func() { once.Do(func() { close(c.release) }) }
	t.Cleanup(free) // before the server closes: it waits for /slow
	assert.Equal(t, "READY=1", next()[0])
	slow := make(chan answer, 1)
	go func() { slow <- c.get(t, "/slow") }()
	<-c.entered
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
	msg := next()
	if msg[0] != "RELOADING=1" { // the move was seen before the receipt
		msg = next()
	}
	assert.Equal(t, []string{"RELOADING=1", "MONOTONIC_USEC=", "STATUS=reloading " + c.loaded[:12] + " to " + c.moved[:12]}, msg)
	assert.Equal(t, []string{"READY=1", "STATUS=serving " + c.loaded[:12] + ", stale: reload postponed: guarded work still ran at the drain deadline"}, next())
	free()
	assert.Equal(t, answer{code: http.StatusOK, body: "done"}, <-slow)
	for {
		msg = next()
		if msg[0] == "READY=1" && strings.Contains(msg[1], "reloaded from") {
			break
		}
	}
	assert.Equal(t, []string{"READY=1", "STATUS=serving " + c.moved[:12] + ", reloaded from " + c.loaded[:12]}, msg)
}

// A move that nothing proves gets a status that says why, and asks for the
// restart once.
func TestNotifyUnprovenMove(t *testing.T) {
	next := notifySocket(t)
	c := newReloaderCase(t, nil)
	assert.Equal(t, "READY=1", next()[0])
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	status := next()
	require.Len(t, status, 1)
	assert.True(t, strings.HasPrefix(status[0], "STATUS=serving "+c.loaded[:12]+", stale: the checkout moved and no reload can follow (no reload is proven safe: no update is in progress and no receipt was written since the guard bound at "), status[0])
	assert.True(t, strings.HasSuffix(status[0], ": nothing proves this move of the checkout); restart to load the new code"), status[0])
	assert.Equal(t, 1, strings.Count(status[0], "restart"), status[0])
}
