package runtimeguard

import (
	"bytes"
	"encoding/json"
	"log/slog"
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

	const checks = 2000
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
