package runtimeguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// reloaderCase is a guarded HTTP server with a Reloader whose restart is
// recorded: the host code of an in-process reload.
type reloaderCase struct {
	*reloadCase
	rl       *Reloader
	cancel   context.CancelFunc // ends the Reloader
	srv      *httptest.Server
	restarts atomic.Int32
	fail     atomic.Bool   // the restart fails
	panics   atomic.Bool   // the restart panics
	release  chan struct{} // closed to let /slow return
	entered  chan struct{} // /slow is running
}

func newReloaderCase(t *testing.T, stale func(*http.Request, *StaleError)) *reloaderCase {
	t.Helper()
	return newReloaderCaseWith(t, stale, nil)
}

// newReloaderCaseWith is newReloaderCase with the Reloader's options
// changed by opts.
func newReloaderCaseWith(t *testing.T, stale func(*http.Request, *StaleError), opts func(*ReloaderOptions)) *reloaderCase {
	t.Helper()
	tmp := tempDir(t)
	c := &reloaderCase{reloadCase: &reloadCase{dir: filepath.Join(tmp, "home", "hermes-agent"), home: filepath.Join(tmp, "home")},
		release: make(chan struct{}), entered: make(chan struct{}, 8)}
	c.module, c.loaded = agentRepo(t, c.dir)
	require.NoError(t, os.MkdirAll(c.home, 0o755))
	var err error
	c.g, err = New(Options{ModulePath: c.module, HomeDir: c.home, OnStale: stale})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	ro := ReloaderOptions{
		ProofInterval: 10 * time.Millisecond,
		DrainTimeout:  10 * time.Second,
		Restart: func(ctx context.Context, plan *Plan) error {
			c.restarts.Add(1)
			if c.panics.Load() {
				panic("the plugin loader broke")
			}
			if c.fail.Load() {
				return errors.New("the workers did not start")
			}
			return nil
		},
	}
	if opts != nil {
		opts(&ro)
	}
	c.rl, err = NewReloader(ctx, c.g, ro)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, c.g.Identity().Revision) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		c.entered <- struct{}{}
		<-c.release
		io.WriteString(w, "done")
	})
	c.srv = httptest.NewServer(c.rl.Wrap(mux))
	t.Cleanup(func() {
		c.srv.Close()
		cancel()
		<-c.rl.Done()
	})
	return c
}

// answer is one response of the server.
type answer struct {
	code       int
	body       string
	retryAfter string
	payload    Payload
}

func (c *reloaderCase) get(t *testing.T, path string) answer {
	t.Helper()
	resp, err := http.Get(c.srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{code: resp.StatusCode, body: string(body), retryAfter: resp.Header.Get("Retry-After")}
	if a.code == http.StatusConflict {
		require.NoError(t, json.Unmarshal(body, &a.payload), "%s", body)
	}
	return a
}

// The moment a host misses by itself: the checkout moves while the updater
// still runs (its marker active, no receipt yet), so the first plan
// fails. The Reloader waits, saying so in its 409s, and reloads once the
// updater's receipt proves it; no request was answered anything but the
// old code, a 409, or the new code.
func TestReloaderWaitsForTheProof(t *testing.T) {
	c := newReloaderCase(t, nil)
	require.Equal(t, c.loaded, c.get(t, "/").body)

	marker := filepath.Join(c.home, hermesMarker)
	gittest.WriteMarker(t, marker, os.Getpid(), time.Now()) // the updater runs
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	require.Eventually(t, func() bool {
		a := c.get(t, "/")
		return a.code == http.StatusConflict && a.payload.Error == c.g.config().autoMessage
	}, 10*time.Second, 5*time.Millisecond, "the 409 says the server reloads by itself")
	a := c.get(t, "/")
	assert.False(t, a.payload.RestartScheduled, "nothing is scheduled before the proof")
	assert.Contains(t, a.payload.Error, "Hermes Agent was updated")
	assert.NotContains(t, a.payload.Error, "manually")
	assert.Equal(t, int32(0), c.restarts.Load(), "no restart while the update runs")

	// The updater finishes: its receipt, then its marker removed.
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen2-no-id-success.json", c.moved, time.Now())))
	require.NoError(t, os.Remove(marker))
	require.Eventually(t, func() bool { return c.get(t, "/").code == http.StatusOK }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, c.moved, c.get(t, "/").body)
	assert.Equal(t, int32(1), c.restarts.Load())
	assert.Equal(t, [2]uint64{1, 0}, [2]uint64{c.g.Stats().Reloads, c.g.Stats().ReloadsAbandoned})

	// And the next update reloads again.
	gittest.WriteMarker(t, marker, os.Getpid(), time.Now())
	third := commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 3\n")
	require.Eventually(t, func() bool { return c.get(t, "/").code == http.StatusConflict }, 10*time.Second, 5*time.Millisecond)
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen3-correlation-success-latest.json", third, time.Now())))
	require.NoError(t, os.Remove(marker))
	require.Eventually(t, func() bool { return c.get(t, "/").body == third }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, [2]uint64{2, 0}, [2]uint64{c.g.Stats().Reloads, c.g.Stats().ReloadsAbandoned})
}

// A failed update proves that no reload can come: the 409 goes back to
// the guard's own message, and nothing restarts.
func TestReloaderFailedUpdate(t *testing.T) {
	var hooked atomic.Int32
	c := newReloaderCase(t, func(r *http.Request, se *StaleError) { hooked.Add(1) })
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-failed.json", c.moved, time.Now())))
	require.Eventually(t, func() bool {
		a := c.get(t, "/")
		return a.code == http.StatusConflict && a.payload.Error == defaultMessage
	}, 10*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // several proof intervals
	assert.Equal(t, int32(0), c.restarts.Load())
	assert.Positive(t, hooked.Load(), "the stale hook saw the 409s")
	assert.Empty(t, c.get(t, "/").retryAfter, "no Retry-After without a scheduled reload")
}

// Guarded work in flight drains before the restart; a request that comes
// meanwhile is told a reload is scheduled, with Retry-After.
func TestReloaderDrains(t *testing.T) {
	c := newReloaderCase(t, nil)
	slow := make(chan answer, 1)
	go func() { slow <- c.get(t, "/slow") }()
	<-c.entered
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
	var a answer
	require.Eventually(t, func() bool {
		a = c.get(t, "/")
		return a.code == http.StatusConflict && a.payload.RestartScheduled
	}, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, "1", a.retryAfter)
	assert.Equal(t, int32(0), c.restarts.Load(), "no restart while guarded work runs")
	close(c.release)
	assert.Equal(t, answer{code: http.StatusOK, body: "done"}, <-slow, "the work in flight finished on the old code")
	require.Eventually(t, func() bool { return c.get(t, "/").body == c.moved }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, int32(1), c.restarts.Load())
}

// A restart that fails keeps the guard stale on the old code, and the
// receipt allows no second attempt.
func TestReloaderRestartFails(t *testing.T) {
	c := newReloaderCase(t, nil)
	c.fail.Store(true)
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
	require.Eventually(t, func() bool { return c.g.Stats().ReloadsAbandoned == 1 }, 10*time.Second, 5*time.Millisecond)
	a := c.get(t, "/")
	assert.Equal(t, http.StatusConflict, a.code)
	assert.False(t, a.payload.RestartScheduled)
	assert.Equal(t, c.loaded, c.g.Identity().Revision)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, int32(1), c.restarts.Load(), "a spent receipt allows no second restart")
}

// The options are checked, and a guard has one Reloader.
func TestNewReloaderOptions(t *testing.T) {
	c := newReloadCase(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	restart := func(context.Context, *Plan) error { return nil }
	for _, tc := range []struct {
		opts ReloaderOptions
		want string
	}{
		{ReloaderOptions{}, "ReloaderOptions.Restart"},
		{ReloaderOptions{Restart: restart, Handover: restart}, "ReloaderOptions.Restart"},
		{ReloaderOptions{Restart: restart, DrainTimeout: -1}, "ReloaderOptions.DrainTimeout"},
		{ReloaderOptions{Restart: restart, ProofInterval: -1}, "ReloaderOptions.ProofInterval"},
	} {
		_, err := NewReloader(ctx, c.g, tc.opts)
		var oe *OptionError
		if assert.ErrorAs(t, err, &oe, "every option that describes no reload is an *OptionError") {
			assert.Equal(t, tc.want, oe.Field)
		}
	}
	_, err := NewReloader(ctx, nil, ReloaderOptions{Restart: restart})
	assert.Error(t, err)
	rl, err := NewReloader(ctx, c.g, ReloaderOptions{Restart: restart})
	require.NoError(t, err)
	_, err = NewReloader(ctx, c.g, ReloaderOptions{Restart: restart})
	assert.ErrorContains(t, err, "has a Reloader already")
	cancel()
	<-rl.Done()
}

// A restart that panics abandons the reload as one that failed: the
// process goes on, on the old code and stale, the panic is logged, no
// request waits on a gate left closed, and the next update reloads.
func TestReloaderRestartPanics(t *testing.T) {
	c := newReloaderCase(t, nil)
	c.panics.Store(true)
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
	require.Eventually(t, func() bool { return c.g.Stats().ReloadsAbandoned == 1 }, 10*time.Second, 5*time.Millisecond)
	a := c.get(t, "/")
	assert.Equal(t, http.StatusConflict, a.code)
	assert.False(t, a.payload.RestartScheduled)
	assert.Equal(t, c.loaded, c.g.Identity().Revision)
	assert.Equal(t, int32(1), c.restarts.Load())

	c.panics.Store(false)
	third := commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 3\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen3-correlation-success-latest.json", third, time.Now())))
	require.Eventually(t, func() bool { return c.get(t, "/").body == third }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, [2]uint64{1, 1}, [2]uint64{c.g.Stats().Reloads, c.g.Stats().ReloadsAbandoned})
}

// Guarded work that outlasts the drain deadline (a streamed answer, a
// long poll) abandons that attempt, which loaded nothing: the receipt is
// not spent on it, and the reload is carried out once the work ended,
// instead of never.
func TestReloaderRetriesAfterDrainDeadline(t *testing.T) {
	c := newReloaderCaseWith(t, nil, func(o *ReloaderOptions) { o.DrainTimeout = 50 * time.Millisecond })
	var once sync.Once
	free := func() { once.Do(func() { close(c.release) }) }
	t.Cleanup(free) // before the server closes: it waits for /slow
	slow := make(chan answer, 1)
	go func() { slow <- c.get(t, "/slow") }()
	<-c.entered
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
	require.Eventually(t, func() bool { return c.g.Stats().ReloadsAbandoned >= 2 }, 10*time.Second, 5*time.Millisecond,
		"the attempt is abandoned at the deadline, and tried again")
	assert.Equal(t, int32(0), c.restarts.Load(), "no restart while guarded work runs")
	assert.Equal(t, http.StatusConflict, c.get(t, "/").code)
	free()
	assert.Equal(t, answer{code: http.StatusOK, body: "done"}, <-slow, "the work in flight finished on the old code")
	require.Eventually(t, func() bool { return c.get(t, "/").body == c.moved }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, int32(1), c.restarts.Load())
	assert.Equal(t, uint64(1), c.g.Stats().Reloads)
}

// A Reloader leaves nothing running once its context is done: not its
// watch, not its wait for a proof, whether the checkout moved or not, nor
// when its context was done before it started. (Goroutines are counted
// before and after many Reloaders of one guard.)
func TestReloaderLeavesNoGoroutine(t *testing.T) {
	c := newReloadCase(t) // moved, no receipt: every Reloader awaits the proof
	restart := func(context.Context, *Plan) error { return nil }
	gittest.WriteMarker(t, filepath.Join(c.home, hermesMarker), os.Getpid(), time.Now())
	start := func(ctx context.Context) *Reloader {
		rl, err := NewReloader(ctx, c.g, ReloaderOptions{Restart: restart, ProofInterval: time.Millisecond})
		require.NoError(t, err)
		return rl
	}
	// One round first, so that what the guard keeps for good (its watch
	// descriptor's reader, timers) is counted in the baseline.
	ctx, cancel := context.WithCancel(context.Background())
	rl := start(ctx)
	time.Sleep(20 * time.Millisecond)
	cancel()
	<-rl.Done()
	before := runtime.NumGoroutine()
	for i := range 30 {
		ctx, cancel := context.WithCancel(context.Background())
		if i%3 == 0 {
			cancel() // done before it starts
		}
		rl := start(ctx)
		time.Sleep(time.Duration(i%3) * 5 * time.Millisecond)
		cancel()
		<-rl.Done()
	}
	// Counted here, not in assert.Eventually, whose own goroutines count.
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !assert.LessOrEqual(t, runtime.NumGoroutine(), before) {
		buf := make([]byte, 1<<20)
		t.Logf("goroutines: %d before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
	assert.Equal(t, c.loaded, c.g.Identity().Revision)
}

// A storm of stale requests while the update runs does not turn into a
// storm of plans (each a read of the checkout and of the updater's files):
// a request asks for an early look, and looks are spaced by a quarter of
// the proof interval whatever the requests.
func TestReloaderStormDoesNotPlanPerRequest(t *testing.T) {
	const interval = 100 * time.Millisecond
	c := newReloaderCaseWith(t, nil, func(o *ReloaderOptions) { o.ProofInterval = interval })
	gittest.WriteMarker(t, filepath.Join(c.home, hermesMarker), os.Getpid(), time.Now()) // the updater runs
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	require.Eventually(t, func() bool { return c.get(t, "/").code == http.StatusConflict }, 10*time.Second, 5*time.Millisecond)
	startPlans, start := c.rl.plans.Load(), time.Now()
	var stale atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < 500*time.Millisecond {
				resp, err := http.Get(c.srv.URL + "/")
				if !assert.NoError(t, err) {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusConflict {
					stale.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	plans, elapsed := c.rl.plans.Load()-startPlans, time.Since(start)
	limit := uint64(elapsed/(interval/4)) + 2
	t.Logf("%d stale answers, %d plans in %v (at most %d)", stale.Load(), plans, elapsed, limit)
	assert.Greater(t, stale.Load(), int64(limit), "the storm is a storm")
	assert.LessOrEqual(t, plans, limit)
	assert.Equal(t, int32(0), c.restarts.Load())
}

// A plain git pull (no updater, no receipt): nothing will prove the move,
// so the 409s give the manual message from the Reloader's first look on,
// and still a minute later; the operator's log says why, once.
func TestReloaderAfterAPlainPull(t *testing.T) {
	tmp := tempDir(t)
	dir, home := filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
	module, _ := agentRepo(t, dir)
	require.NoError(t, os.MkdirAll(home, 0o755))
	g, err := New(Options{ModulePath: module, HomeDir: home})
	require.NoError(t, err)
	var skew atomic.Int64
	e := testEnv(nil)
	e.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	g.cfg.env = e
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	rl, err := NewReloader(ctx, g, ReloaderOptions{
		ProofInterval: 10 * time.Millisecond,
		Logger:        slog.New(slog.NewJSONHandler(&logs, nil)),
		Restart:       func(context.Context, *Plan) error { return errors.New("no reload is proven") },
	})
	require.NoError(t, err)
	srv := httptest.NewServer(rl.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	t.Cleanup(func() { srv.Close(); cancel(); <-rl.Done() })
	manual := g.config().message

	commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n")
	ask := func() Payload {
		resp, err := http.Get(srv.URL)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		var p Payload
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
		return p
	}
	// Once the Reloader looked at the move, every 409 says to restart.
	looked := func(after uint64) {
		require.Eventually(t, func() bool { ask(); return rl.plans.Load() > after+1 }, 10*time.Second, time.Millisecond)
	}
	looked(rl.plans.Load())
	assert.Equal(t, manual, ask().Error)
	skew.Store(int64(time.Minute))
	looked(rl.plans.Load())
	assert.Equal(t, manual, ask().Error, "a minute later")
	var said []string
	for _, l := range logs.lines(t) {
		if strings.Contains(fmt.Sprint(l["msg"]), "no reload will prove this move") {
			said = append(said, fmt.Sprint(l["why"]))
		}
	}
	require.Len(t, said, 1, "the operator's log says why once")
	assert.Contains(t, said[0], "no update is in progress and no receipt was written")
}

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
	if runtime.GOOS != "linux" {
		t.Skip("systemd, the service manager, is Linux")
	}
	next := notifySocket(t)
	c := newReloaderCase(t, nil)
	assert.Equal(t, []string{"READY=1", "STATUS=serving " + c.loaded[:12]}, next())

	marker := filepath.Join(c.home, hermesMarker)
	gittest.WriteMarker(t, marker, os.Getpid(), time.Now())
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	assert.Equal(t, []string{"STATUS=serving " + c.loaded[:12] + ", stale: the checkout moved; reloading once the update is proven"}, next())

	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen2-no-id-success.json", c.moved, time.Now())))
	require.NoError(t, os.Remove(marker))
	assert.Equal(t, []string{"RELOADING=1", "MONOTONIC_USEC=", "STATUS=reloading " + c.loaded[:12] + " to " + c.moved[:12]}, next())
	assert.Equal(t, []string{"READY=1", "STATUS=serving " + c.moved[:12] + ", reloaded from " + c.loaded[:12]}, next())
	assert.Equal(t, c.moved, c.get(t, "/").body)
}

// A reload that fails is followed by READY=1 all the same: the old code
// serves on, stale, and the status says so.
func TestNotifyAbandonedReload(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd, the service manager, is Linux")
	}
	next := notifySocket(t)
	c := newReloaderCase(t, nil)
	c.fail.Store(true)
	assert.Equal(t, "READY=1", next()[0])
	// The update runs under its marker, as the updater's does: its move
	// waits for the proof rather than ask for a manual restart.
	marker := filepath.Join(c.home, hermesMarker)
	gittest.WriteMarker(t, marker, os.Getpid(), time.Now())
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	assert.Contains(t, next()[0], "reloading once the update is proven")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
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
	if runtime.GOOS != "linux" {
		t.Skip("systemd, the service manager, is Linux")
	}
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
	if runtime.GOOS != "linux" {
		t.Skip("systemd, the service manager, is Linux")
	}
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
	if runtime.GOOS != "linux" {
		t.Skip("systemd, the service manager, is Linux")
	}
	name := filepath.Join(t.TempDir(), "notify")
	gittest.FullDatagramSocket(t, name)
	t.Setenv("NOTIFY_SOCKET", name)
	var logs lockedBuffer
	c := newReloaderCaseWith(t, nil, func(o *ReloaderOptions) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
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
	if runtime.GOOS != "linux" {
		t.Skip("systemd, the service manager, is Linux")
	}
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
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
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
	if runtime.GOOS != "linux" {
		t.Skip("systemd, the service manager, is Linux")
	}
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

// A move to no revision (the .git removed, as an rsync of a release
// without it does; the module untracked in a commit; the branch deleted)
// is proven by nothing while no update runs: the Reloader's 409s give the
// manual message from its first look on, and PlanReload says so without
// "not yet". While an update visibly runs (its marker active) the same
// move is one it may still finish, and the 409 says the server reloads by
// itself.
func TestReloaderNoRevisionPromisesNothing(t *testing.T) {
	ways := []struct {
		name string
		move func(t *testing.T, dir string)
	}{
		{"the .git removed", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, ".git")))
		}},
		{"the module untracked", func(t *testing.T, dir string) {
			git(t, dir, "rm", "-q", "--cached", "run_agent.py")
			git(t, dir, "commit", "-q", "-m", "untrack the module")
		}},
		{"the branch deleted", func(t *testing.T, dir string) {
			git(t, dir, "update-ref", "-d", git(t, dir, "symbolic-ref", "HEAD"))
		}},
	}
	for _, w := range ways {
		for _, running := range []bool{false, true} {
			name := w.name
			if running {
				name += ", an update running"
			}
			t.Run(name, func(t *testing.T) {
				c := newReloaderCase(t, nil)
				if running {
					gittest.WriteMarker(t, filepath.Join(c.home, hermesMarker), os.Getpid(), time.Now())
				}
				w.move(t, c.dir)
				require.ErrorIs(t, c.g.EnsureCurrent(), ErrStale)
				_, err := c.g.PlanReload(context.Background())
				require.ErrorIs(t, err, ErrNotReady)
				assert.Equal(t, running, isPending(err), "%v", err)
				want := c.g.config().message
				if running {
					want = c.g.config().autoMessage
				}
				after := c.rl.plans.Load()
				require.Eventually(t, func() bool { c.get(t, "/"); return c.rl.plans.Load() > after+1 }, 10*time.Second, time.Millisecond)
				a := c.get(t, "/")
				require.Equal(t, http.StatusConflict, a.code)
				assert.Equal(t, want, a.payload.Error)
				assert.False(t, a.payload.RestartScheduled)
				assert.Empty(t, a.retryAfter)
				assert.Equal(t, int32(0), c.restarts.Load())
			})
		}
	}
}

// TestReloaderOptionErrors: the Reloader's options are named the same way.
func TestReloaderOptionErrors(t *testing.T) {
	g, err := New(Options{})
	require.NoError(t, err)
	restart := func(context.Context, *Plan) error { return nil }
	for _, c := range []struct {
		opts  ReloaderOptions
		field string
		value any
	}{
		{ReloaderOptions{Restart: restart, DrainTimeout: -time.Second}, "ReloaderOptions.DrainTimeout", -time.Second},
		{ReloaderOptions{Restart: restart, ProofInterval: -time.Second}, "ReloaderOptions.ProofInterval", -time.Second},
		{ReloaderOptions{}, "ReloaderOptions.Restart", nil},
		{ReloaderOptions{Restart: restart, Handover: restart}, "ReloaderOptions.Restart", nil},
	} {
		_, err := NewReloader(context.Background(), g, c.opts)
		var oe *OptionError
		require.ErrorAs(t, err, &oe, c.field)
		assert.Equal(t, c.field, oe.Field)
		assert.Equal(t, c.value, oe.Value)
		// The value as it is (a func has none worth printing), the field
		// and why, with the prefix once.
		want := "runtimeguard: " + c.field + " " + fmt.Sprint(c.value) + ": "
		if c.value == nil {
			want = "runtimeguard: " + c.field + ": "
		}
		assert.True(t, strings.HasPrefix(err.Error(), want), "%q", err)
		assert.Contains(t, err.Error(), oe.Reason)
	}
}
