package runtimeguard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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

// lockedBuffer is a buffer that log lines may be written to at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the JSON log lines written so far.
func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		out = append(out, m)
	}
	return out
}

// Repeated stale checks under load are logged once at Warn, then at most
// once per interval at Debug, with the number refused since: not a line
// per request.
func TestRepeatedStaleChecksAreRateLimited(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	var buf lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t), Logger: logger}, settledEnv())
	require.NoError(t, err)
	const every = 200 * time.Millisecond
	g.cfg.staleLogEvery = every
	gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")

	checks := loopLength(2000, 400) // many in every interval, either way
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < checks/4; i++ {
				assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
			}
		}()
	}
	wg.Wait()
	time.Sleep(every)
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale) // past the interval: logged
	elapsed := time.Since(start)

	lines := buf.lines(t)
	require.NotEmpty(t, lines)
	assert.Equal(t, "WARN", lines[0]["level"])
	assert.GreaterOrEqual(t, len(lines), 2, "the check past the interval was logged")
	assert.LessOrEqual(t, len(lines), 2+int(elapsed/every), "log lines for %d stale checks in %v", checks+1, elapsed)
	refused := 0.0
	for _, l := range lines[1:] {
		assert.Equal(t, "DEBUG", l["level"])
		refused += l["refused_since_last_log"].(float64)
	}
	assert.Equal(t, float64(checks), refused, "every repeat counted once")
	last := lines[len(lines)-1]
	assert.Equal(t, float64(checks+1), last["stale_checks"])
}

// logged is what a JSON handler installed as slog.Default() receives
// until the test ends, when the default before it is restored.
func logged(t *testing.T) *lockedBuffer {
	t.Helper()
	var buf lockedBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &buf
}

// messages are the messages of lines, in order.
func messages(lines []map[string]any) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l["msg"].(string))
	}
	return out
}

// With no Logger, what an operator must know goes to slog.Default(), once:
// a guard bound without Git, the first stale answer (not the many after it,
// even at Debug), a reload done, a reload abandoned.
func TestNoLoggerTellsTheDefaultLogger(t *testing.T) {
	t.Run("without Git", func(t *testing.T) {
		buf := logged(t)
		module := filepath.Join(tempDir(t), "run_agent.py")
		writeFile(t, module, "class AIAgent: pass\n")
		g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
		require.NoError(t, err)
		defer g.Close()
		for i := 0; i < 10; i++ {
			require.NoError(t, g.EnsureCurrent())
		}
		assert.Equal(t, []string{"runtimeguard: no Git checkout identifies the module: the guard identifies the install by its file"}, messages(buf.lines(t)))
	})
	t.Run("stale", func(t *testing.T) {
		buf := logged(t)
		dir := tempDir(t)
		module, _ := agentRepo(t, dir)
		g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, settledEnv())
		require.NoError(t, err)
		defer g.Close()
		g.cfg.staleLogEvery = 0 // a Logger's Debug line would come with every check after the first
		gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")
		for i := 0; i < 100; i++ {
			require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		}
		lines := buf.lines(t)
		require.Equal(t, []string{"runtimeguard: the loaded runtime is stale"}, messages(lines))
		assert.Equal(t, "WARN", lines[0]["level"])
	})
	t.Run("reloaded", func(t *testing.T) {
		buf := logged(t)
		c := newReloaderCase(t, nil)
		c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
		writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
		require.Eventually(t, func() bool { return c.g.Stats().Reloads == 1 }, 10*time.Second, 5*time.Millisecond)
		assert.Contains(t, messages(buf.lines(t)), "runtimeguard: reloaded")
	})
	t.Run("abandoned", func(t *testing.T) {
		buf := logged(t)
		c := newReloaderCase(t, nil)
		c.fail.Store(true)
		c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
		writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
		require.Eventually(t, func() bool { return c.g.Stats().ReloadsAbandoned == 1 }, 10*time.Second, 5*time.Millisecond)
		assert.Contains(t, messages(buf.lines(t)), "runtimeguard: reload abandoned: the restart failed")
	})
}

// A stale guard whose checkout came back to the bound revision says so
// once, at Info, however many checks find it current; each move away and
// back is a transition of its own.
func TestCurrentAgainIsLoggedOnce(t *testing.T) {
	dir := tempDir(t)
	module, loaded := agentRepo(t, dir)
	var buf lockedBuffer
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t), Logger: slog.New(slog.NewJSONHandler(&buf, nil))}, settledEnv())
	require.NoError(t, err)
	defer g.Close()
	moved := gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")
	for round := 0; round < 2; round++ {
		for i := 0; i < 5; i++ {
			require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		}
		gittest.Git(t, dir, "reset", "-q", "--hard", loaded)
		for i := 0; i < 5; i++ {
			require.NoError(t, g.EnsureCurrent())
		}
		gittest.Git(t, dir, "reset", "-q", "--hard", moved)
	}
	lines := buf.lines(t)
	assert.Equal(t, []string{
		"runtimeguard: the loaded runtime is stale", "runtimeguard: the loaded runtime is current again",
		"runtimeguard: the loaded runtime is stale", "runtimeguard: the loaded runtime is current again",
	}, messages(lines))
	var counts []float64
	for _, l := range lines {
		if l["msg"] == "runtimeguard: the loaded runtime is current again" {
			assert.Equal(t, "INFO", l["level"])
			assert.Equal(t, loaded, l["revision"])
			counts = append(counts, l["stale_checks"].(float64))
		}
	}
	assert.Equal(t, []float64{5, 10}, counts, "the binding's stale checks so far")
}

// stale_checks counts the stale checks of the binding that answers: a
// guard bound anew (a reload) counts from one again.
func TestStaleChecksCountPerBinding(t *testing.T) {
	var buf lockedBuffer
	c := newReloadCase(t)
	gittest.Git(t, c.dir, "reset", "-q", "--hard", c.loaded)
	g, err := New(Options{ModulePath: c.module, HomeDir: c.home, Layout: c.layout, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	require.NoError(t, err)
	defer g.Close()
	require.NoError(t, g.EnsureCurrent())
	gittest.Git(t, c.dir, "reset", "-q", "--hard", c.moved)
	for i := 0; i < 7; i++ {
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
	}
	c.success(t)
	plan, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	require.NoError(t, plan.Schedule())
	require.NoError(t, plan.Bind(context.Background()))
	require.NoError(t, g.EnsureCurrent())
	gittest.Commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 3\n")
	require.ErrorIs(t, g.EnsureCurrent(), ErrStale)

	var counts []float64
	for _, l := range buf.lines(t) {
		if l["msg"] == "runtimeguard: the loaded runtime is stale" {
			counts = append(counts, l["stale_checks"].(float64))
		}
	}
	assert.Equal(t, []float64{1, 1}, counts, "the first stale check of each binding")
}

// A reload logs one line, "reloaded", with where from and to and the
// receipt that proved it: not a line to schedule it and two to say it
// was done.
func TestAReloadLogsOneLine(t *testing.T) {
	buf := logged(t)
	c := newReloaderCase(t, nil)
	// The update runs under its marker, as the updater's does.
	marker := filepath.Join(c.home, hermesMarker)
	writeMarker(t, marker, os.Getpid(), time.Now())
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
	require.NoError(t, os.Remove(marker))
	require.Eventually(t, func() bool { return c.g.Stats().Reloads == 1 }, 10*time.Second, 5*time.Millisecond)
	c.cancel()
	<-c.rl.Done()
	var said []map[string]any
	for _, l := range buf.lines(t) {
		msg := strings.ToLower(fmt.Sprint(l["msg"]))
		if l["level"] == "DEBUG" && strings.Contains(msg, "no reload yet") {
			continue // why a reload is not proven yet, while it is not
		}
		if strings.Contains(msg, "reload") || strings.Contains(msg, "bound") {
			said = append(said, l)
		}
	}
	require.Len(t, said, 1, "%v", said)
	assert.Equal(t, "runtimeguard: reloaded", said[0]["msg"])
	assert.Equal(t, "INFO", said[0]["level"])
	assert.Equal(t, c.loaded, said[0]["from"])
	assert.Equal(t, c.moved, said[0]["to"])
	assert.NotEmpty(t, said[0]["receipt"])
}
