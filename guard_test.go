package runtimeguard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// changedCheckout is a guard bound to an agent checkout that has since moved
// one commit ahead, with a home directory and a separate venv install root.
type changedCheckout struct {
	root, home, venvRoot, module string
	guard                        *Guard
	loaded, now                  string
}

func newChangedCheckout(t *testing.T) *changedCheckout {
	t.Helper()
	tmp := tempDir(t)
	c := &changedCheckout{
		root:     filepath.Join(tmp, "agent"),
		home:     filepath.Join(tmp, "home"),
		venvRoot: filepath.Join(tmp, "separate-install"),
	}
	c.module, c.loaded = agentRepo(t, c.root)
	require.NoError(t, os.MkdirAll(c.home, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(c.venvRoot, "venv", "bin"), 0o755))
	g, err := New(Options{
		ModulePath: c.module,
		HomeDir:    c.home,
		Python:     filepath.Join(c.venvRoot, "venv", "bin", "python"),
	})
	require.NoError(t, err)
	require.Equal(t, c.loaded, g.Identity().Revision)
	require.NoError(t, g.EnsureCurrent())
	c.guard = g
	c.now = commit(t, c.root, "run_agent.py", "class AIAgent: revision = 'changed'\n")
	return c
}

// The 17 marker situations of the reference suite, each behind a real stale
// check on a real checkout, rendered as the HTTP answer.
func TestStaleCheckReportsUpdateState(t *testing.T) {
	marker := func(c *changedCheckout) string { return filepath.Join(c.home, hermesMarker) }
	cases := []struct {
		name  string
		setup func(t *testing.T, c *changedCheckout)
		want  UpdateState
	}{
		{"absent", func(t *testing.T, c *changedCheckout) {}, UpdateUnverified},
		{"failed-exit", func(t *testing.T, c *changedCheckout) {
			gittest.WriteMarker(t, marker(c), os.Getpid(), time.Now())
			require.NoError(t, os.Remove(marker(c))) // the updater removes it when it fails
		}, UpdateUnverified},
		{"interrupted-exit", func(t *testing.T, c *changedCheckout) {
			gittest.WriteMarker(t, marker(c), os.Getpid(), time.Now().Add(-time.Minute))
			require.NoError(t, os.Remove(marker(c)))
		}, UpdateUnverified},
		{"active", func(t *testing.T, c *changedCheckout) {
			gittest.WriteMarker(t, marker(c), os.Getpid(), time.Now())
		}, UpdateActive},
		{"dead", func(t *testing.T, c *changedCheckout) {
			gittest.WriteMarker(t, marker(c), gittest.ExitedPID(t, processGone), time.Now())
		}, UpdateAbandoned},
		{"over-age", func(t *testing.T, c *changedCheckout) {
			gittest.WriteMarker(t, marker(c), os.Getpid(), time.Now().Add(-24*time.Hour))
		}, UpdateAbandoned},
		{"malformed", func(t *testing.T, c *changedCheckout) {
			writeFile(t, marker(c), "not-a-pid\nnot-a-time\n")
		}, UpdateUnknown},
		{"invalid-encoding", func(t *testing.T, c *changedCheckout) {
			writeFile(t, marker(c), "\xff\xfe")
		}, UpdateUnknown},
		{"future", func(t *testing.T, c *changedCheckout) {
			gittest.WriteMarker(t, marker(c), os.Getpid(), time.Now().Add(24*time.Hour))
		}, UpdateUnknown},
		{"nonfinite", func(t *testing.T, c *changedCheckout) {
			writeFile(t, marker(c), fmt.Sprintf("%d\nnan\n", os.Getpid()))
		}, UpdateUnknown},
		{"oversized-pid", func(t *testing.T, c *changedCheckout) {
			huge := new(big.Int).Lsh(big.NewInt(1), 100)
			writeFile(t, marker(c), fmt.Sprintf("%s\n%d\n", huge, time.Now().Unix()))
		}, UpdateUnknown},
		{"dangling", func(t *testing.T, c *changedCheckout) {
			require.NoError(t, os.Symlink(filepath.Join(c.home, "missing"), marker(c)))
		}, UpdateUnknown},
		{"unreadable", func(t *testing.T, c *changedCheckout) {
			require.NoError(t, os.Mkdir(marker(c), 0o755))
		}, UpdateUnknown},
		{"update-incomplete", func(t *testing.T, c *changedCheckout) {
			writeFile(t, filepath.Join(c.root, hermesIncomplete), "")
		}, UpdateIncomplete},
		{"lazy-refresh-incomplete", func(t *testing.T, c *changedCheckout) {
			writeFile(t, filepath.Join(c.root, hermesLazy), "")
		}, UpdateIncomplete},
		{"separate-venv-incomplete", func(t *testing.T, c *changedCheckout) {
			writeFile(t, filepath.Join(c.venvRoot, hermesIncomplete), "")
		}, UpdateIncomplete},
		{"symlink-venv-incomplete", func(t *testing.T, c *changedCheckout) {
			exe, err := exec.LookPath("git")
			require.NoError(t, err)
			require.NoError(t, os.Symlink(exe, filepath.Join(c.venvRoot, "venv", "bin", "python")))
			writeFile(t, filepath.Join(c.venvRoot, hermesIncomplete), "")
		}, UpdateIncomplete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newChangedCheckout(t)
			tc.setup(t, c)

			err := c.guard.EnsureCurrent()
			var se *StaleError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.want, se.State, "StaleError.State")
			assert.Equal(t, c.loaded, se.Captured)
			assert.Equal(t, c.now, se.Current)

			rec := httptest.NewRecorder()
			require.True(t, WriteStale(rec, err))
			assert.Equal(t, http.StatusConflict, rec.Code)
			var payload map[string]any
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &payload))
			assert.Equal(t, PayloadType, payload["type"])
			assert.Equal(t, true, payload["retryable"])
			assert.Equal(t, false, payload["restart_scheduled"])
			assert.Equal(t, string(tc.want), payload["agent_update_state"])
			msg, _ := payload["error"].(string)
			assert.Contains(t, msg, "Restart Hermes WebUI manually")
			assert.NotContains(t, strings.ToLower(msg), "success")
		})
	}
}

// An updater may take its marker right after the check read the revision:
// the answer is still a 409 and nothing is restarted or removed.
func TestMarkerTakenAfterReadStillRefuses(t *testing.T) {
	c := newChangedCheckout(t)
	e := testEnv(nil)
	marker := filepath.Join(c.home, hermesMarker)
	fsys := *gitread.System
	fsys.ReadFile = func(p string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		if _, err := os.Lstat(marker); errors.Is(err, fs.ErrNotExist) {
			gittest.WriteMarker(t, marker, os.Getpid(), time.Now())
		}
		return fsread.ReadRegular(p, limit, nofollow)
	}
	e.git = &fsys
	c.guard.cfg.env = e
	err := c.guard.EnsureCurrent()
	var se *StaleError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, UpdateActive, se.State)
	assert.False(t, se.Payload().RestartScheduled)
	assert.FileExists(t, marker)
}

func TestCommitAfterBindingFailsWithBothRevisions(t *testing.T) {
	c := newChangedCheckout(t)
	err := c.guard.EnsureCurrent()
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrStale))
	assert.True(t, errors.Is(fmt.Errorf("handler: %w", err), ErrStale), "a wrapped StaleError matches ErrStale")
	assert.Contains(t, err.Error(), c.loaded)
	assert.Contains(t, err.Error(), c.now)
	assert.Equal(t, http.StatusConflict, err.(*StaleError).StatusCode())

	// Still stale on every later check, through the fast path too.
	for i := 0; i < 3; i++ {
		assert.ErrorIs(t, c.guard.EnsureCurrent(), ErrStale)
	}
	// Back at the loaded commit, the runtime is current again.
	git(t, c.root, "reset", "-q", "--hard", c.loaded)
	assert.NoError(t, c.guard.EnsureCurrent())
}

func TestNonGitInstallIsInert(t *testing.T) {
	dir := tempDir(t)
	module := filepath.Join(dir, "run_agent.py")
	writeFile(t, module, "class AIAgent: pass\n")
	g, err := New(Options{ModulePath: module, HomeDir: dir})
	require.NoError(t, err)
	assert.Equal(t, Identity{SourceDir: resolved(t, dir), ModulePath: resolved(t, module)}, g.Identity())
	writeFile(t, module, "class AIAgent: changed = True\n")
	assert.NoError(t, g.EnsureCurrent())
}

func TestUntrackedModuleInOuterRepoIsNonGit(t *testing.T) {
	outer := filepath.Join(tempDir(t), "outer-repo")
	moduleDir := filepath.Join(outer, "installed", "hermes-agent")
	module := filepath.Join(moduleDir, "run_agent.py")
	writeFile(t, module, "class AIAgent: pass\n")
	initRepo(t, outer, map[string]string{"tracked.txt": "unrelated\n"})

	g, err := New(Options{ModulePath: module, HomeDir: outer})
	require.NoError(t, err)
	assert.Equal(t, resolved(t, moduleDir), g.Identity().SourceDir)
	assert.Equal(t, resolved(t, module), g.Identity().ModulePath)
	assert.Empty(t, g.Identity().Revision)

	commit(t, outer, "tracked.txt", "unrelated change\n")
	assert.NoError(t, g.EnsureCurrent())
}

func TestPathspecCharactersAreLiteral(t *testing.T) {
	outer := filepath.Join(tempDir(t), "outer-repo")
	writeFile(t, filepath.Join(outer, "installed", "agent", "run_agent.py"), "class Other: pass\n")
	module := filepath.Join(outer, "installed", "[a]gent", "run_agent.py")
	writeFile(t, module, "class AIAgent: pass\n")
	require.NoError(t, os.MkdirAll(outer, 0o755))
	git(t, outer, "init", "-q")
	git(t, outer, "add", "installed/agent/run_agent.py")
	git(t, outer, "commit", "-q", "-m", "tracked lookalike")

	rev, err := inspectRevision(module)
	require.NoError(t, err)
	assert.Empty(t, rev, "gitread.Inspect(%q) read a revision through a pathspec match", module)
	g, err := New(Options{ModulePath: module, HomeDir: outer})
	require.NoError(t, err)
	assert.Equal(t, resolved(t, filepath.Dir(module)), g.Identity().SourceDir)
	assert.Empty(t, g.Identity().Revision)

	// The literal name is tracked once it is added.
	git(t, outer, "add", "--", module)
	rev, err = inspectRevision(module)
	require.NoError(t, err)
	assert.Equal(t, git(t, outer, "rev-parse", "HEAD"), rev)
}

func TestIdentityComesFromLoadedModule(t *testing.T) {
	tmp := tempDir(t)
	configured, loaded := filepath.Join(tmp, "configured-agent"), filepath.Join(tmp, "loaded-agent")
	agentRepo(t, configured)
	module, rev := agentRepo(t, loaded)

	g, err := New(Options{ModulePath: module, HomeDir: tmp})
	require.NoError(t, err)
	assert.Equal(t, Identity{SourceDir: resolved(t, loaded), ModulePath: resolved(t, module), Revision: rev}, g.Identity())

	commit(t, configured, "run_agent.py", "class AIAgent: configured = 2\n")
	assert.NoError(t, g.EnsureCurrent(), "a commit in another checkout must not matter")
	commit(t, loaded, "run_agent.py", "class AIAgent: loaded = 2\n")
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
}

func TestKnownRevisionBecomingUnreadableFailsClosed(t *testing.T) {
	dir := tempDir(t)
	module, rev := agentRepo(t, filepath.Join(dir, "agent"))
	g, err := New(Options{ModulePath: module, HomeDir: dir})
	require.NoError(t, err)
	require.NoError(t, os.Rename(filepath.Join(dir, "agent", ".git"), filepath.Join(dir, "moved-git")))

	err = g.EnsureCurrent()
	var se *StaleError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, rev, se.Captured)
	assert.Empty(t, se.Current)
}

func TestRecaptureCannotDowngradeKnownRevision(t *testing.T) {
	dir := tempDir(t)
	agent := filepath.Join(dir, "agent")
	module, rev := agentRepo(t, agent)
	g, err := New(Options{ModulePath: module, HomeDir: dir})
	require.NoError(t, err)
	require.NoError(t, g.Capture(module), "binding again on an unchanged checkout verifies")

	// The revision becomes unreadable while binding again.
	require.NoError(t, os.Rename(filepath.Join(agent, ".git"), filepath.Join(dir, "moved-git")))
	assert.ErrorIs(t, g.Capture(module), ErrStale)
	assert.Equal(t, rev, g.Identity().Revision, "binding again erased the known revision")

	// Binding again with another module while bound is an error that
	// says so, and does not rebind.
	other, _ := agentRepo(t, filepath.Join(dir, "other"))
	err = g.Capture(other)
	assert.ErrorContains(t, err, "the guard is bound to "+module)
	assert.NotErrorIs(t, err, ErrStale)
	assert.Equal(t, resolved(t, agent), g.Identity().SourceDir)

	require.NoError(t, os.Rename(filepath.Join(dir, "moved-git"), filepath.Join(agent, ".git")))
	assert.NoError(t, g.EnsureCurrent())
}

func TestUnboundGuardPassesUntilCaptured(t *testing.T) {
	dir := tempDir(t)
	g, err := New(Options{HomeDir: dir})
	require.NoError(t, err)
	assert.NoError(t, g.EnsureCurrent())
	assert.Equal(t, Identity{}, g.Identity())

	module, rev := agentRepo(t, filepath.Join(dir, "agent"))
	require.NoError(t, g.Capture(module))
	assert.Equal(t, rev, g.Identity().Revision)
	commit(t, filepath.Join(dir, "agent"), "run_agent.py", "x = 1\n")
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
}

func TestInertGuardBindsAgainOnCapture(t *testing.T) {
	dir := tempDir(t)
	module := filepath.Join(dir, "agent", "run_agent.py")
	writeFile(t, module, "class AIAgent: pass\n")
	g, err := New(Options{ModulePath: module, HomeDir: dir})
	require.NoError(t, err)
	require.Empty(t, g.Identity().Revision)

	_, rev := agentRepo(t, filepath.Join(dir, "agent"))
	require.NoError(t, g.Capture(module))
	assert.Equal(t, rev, g.Identity().Revision, "an inert guard binds anew")
}

func TestNewRejectsBadOptions(t *testing.T) {
	dir := tempDir(t)
	_, err := New(Options{ModulePath: filepath.Join(dir, "missing.py")})
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), "runtimeguard: ")

	_, err = New(Options{ModulePath: dir})
	assert.ErrorContains(t, err, "is a directory")

	_, err = New(Options{MaxMarkerAge: -time.Second})
	assert.ErrorContains(t, err, "negative")

	for _, opts := range []Options{
		{Message: "Update was a success; restart"},
		{Message: "SUCCESS"},
		{ServerName: "Successor"},
	} {
		_, err = New(opts)
		assert.ErrorContains(t, err, "success", "New(%+v)", opts)
	}
}

func TestMessageNamesProducts(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g, err := New(Options{ModulePath: module, HomeDir: dir, AgentName: "Plugin Pack", ServerName: "Gateway"})
	require.NoError(t, err)
	commit(t, dir, "run_agent.py", "x = 2\n")
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, "Plugin Pack was updated on disk after Gateway loaded it. Restart Gateway manually to load the new code.", se.Message)

	g, err = New(Options{ModulePath: module, HomeDir: dir, Message: "restart required"})
	require.NoError(t, err)
	commit(t, dir, "run_agent.py", "x = 3\n")
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, "restart required", se.Payload().Error)
}

func TestDefaultMessageContract(t *testing.T) {
	assert.Contains(t, defaultMessage, "Restart Hermes WebUI manually")
	assert.Contains(t, defaultMessage, "Hermes Agent")
	assert.NotContains(t, strings.ToLower(defaultMessage), "success")
}

func TestUpdateStateOfBoundGuard(t *testing.T) {
	dir := tempDir(t)
	home := filepath.Join(dir, "home")
	module, _ := agentRepo(t, filepath.Join(dir, "agent"))
	require.NoError(t, os.MkdirAll(home, 0o755))
	g, err := New(Options{ModulePath: module, HomeDir: home})
	require.NoError(t, err)
	assert.Equal(t, UpdateUnverified, g.Observe().State)
	gittest.WriteMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
	assert.Equal(t, UpdateActive, g.Observe().State)
	writeFile(t, filepath.Join(dir, "agent", hermesLazy), "incomplete\n")
	assert.Equal(t, UpdateIncomplete, g.Observe().State)
}

func TestHomeDirDefaultsToHermesHome(t *testing.T) {
	home := tempDir(t)
	t.Setenv("HERMES_HOME", home)
	g, err := New(Options{})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(home, hermesMarker), g.Observe().MarkerPath)
	require.NoError(t, err)
	gittest.WriteMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
	assert.Equal(t, UpdateActive, g.Observe().State)
}

func TestExpectRevisionCatchesMoveBeforeNew(t *testing.T) {
	dir := tempDir(t)
	module, loaded := agentRepo(t, dir)
	moved := commit(t, dir, "run_agent.py", "moved before the guard was made\n")

	g, err := New(Options{ModulePath: module, HomeDir: dir, ExpectRevision: strings.ToUpper(loaded)})
	require.NoError(t, err)
	assert.Equal(t, loaded, g.Identity().Revision)
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, loaded, se.Captured)
	assert.Equal(t, moved, se.Current)

	g, err = New(Options{ModulePath: module, HomeDir: dir, ExpectRevision: moved})
	require.NoError(t, err)
	assert.NoError(t, g.EnsureCurrent())

	for _, bad := range []string{"abc", strings.Repeat("g", 40), loaded + "0"} {
		_, err = New(Options{ModulePath: module, ExpectRevision: bad})
		assert.ErrorContains(t, err, "not a full hex object id", "ExpectRevision %q", bad)
	}
	_, err = New(Options{ExpectRevision: loaded})
	assert.ErrorContains(t, err, "needs a ModulePath")
}

// recordHandler keeps the records a logger hands it.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
	lines   int // counted by countingWriter
}

// count is how many lines were written.
func (h *recordHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lines
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordHandler) levels() []slog.Level {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ls []slog.Level
	for _, r := range h.records {
		ls = append(ls, r.Level)
	}
	return ls
}

func TestLoggerWarnsOnceThenDebugs(t *testing.T) {
	dir := tempDir(t)
	module, loaded := agentRepo(t, dir)
	h := &recordHandler{}
	g, err := New(Options{ModulePath: module, HomeDir: dir, Logger: slog.New(h)})
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	assert.Empty(t, h.levels(), "a current check logs nothing")

	moved := commit(t, dir, "run_agent.py", "x = 2\n")
	for i := 0; i < 3; i++ {
		require.Error(t, g.EnsureCurrent())
	}
	// The repeats within the interval are counted, not logged (see
	// TestRepeatedStaleChecksAreRateLimited).
	assert.Equal(t, []slog.Level{slog.LevelWarn}, h.levels())

	h.mu.Lock()
	var text strings.Builder
	h.records[0].Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&text, "%s=%v ", a.Key, a.Value.Resolve())
		return true
	})
	h.mu.Unlock()
	assert.Contains(t, text.String(), loaded)
	assert.Contains(t, text.String(), moved)
	assert.Contains(t, text.String(), "update_state=unverified")

	// Current again (said at Info), then stale again: a new transition
	// warns again.
	git(t, dir, "reset", "-q", "--hard", loaded)
	require.NoError(t, g.EnsureCurrent())
	git(t, dir, "reset", "-q", "--hard", moved)
	require.Error(t, g.EnsureCurrent())
	assert.Equal(t, []slog.Level{slog.LevelWarn, slog.LevelInfo, slog.LevelWarn}, h.levels())
}

func TestZeroGuardIsUsable(t *testing.T) {
	t.Setenv("HERMES_HOME", tempDir(t))
	var g Guard
	assert.NoError(t, g.EnsureCurrent())
	assert.Equal(t, UpdateUnverified, g.Observe().State)
	dir := tempDir(t)
	module, rev := agentRepo(t, dir)
	require.NoError(t, g.Capture(module))
	assert.Equal(t, rev, g.Identity().Revision)
	commit(t, dir, "run_agent.py", "x = 2\n")
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, defaultMessage, se.Message)
	assert.Equal(t, UpdateUnverified, se.State)
}

// An empty module path leads to no file: Capture's error says so in the
// class a host acts on, as for a path that names a missing file.
func TestCaptureEmptyPathIsNoModule(t *testing.T) {
	var g Guard
	err := g.Capture("")
	require.ErrorIs(t, err, ErrNoModule)
	assert.Equal(t, "runtimeguard: empty module path", err.Error())
	assert.Empty(t, g.Identity())
}

// lockedBuffer is a buffer that log lines may be written to at once.
type lockedBuffer struct{ gittest.Buffer }

// lines returns the JSON log lines written so far.
func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
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
		writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
		require.Eventually(t, func() bool { return c.g.Stats().Reloads == 1 }, 10*time.Second, 5*time.Millisecond)
		assert.Contains(t, messages(buf.lines(t)), "runtimeguard: reloaded")
	})
	t.Run("abandoned", func(t *testing.T) {
		buf := logged(t)
		c := newReloaderCase(t, nil)
		c.fail.Store(true)
		c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
		writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
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
	gittest.WriteMarker(t, marker, os.Getpid(), time.Now())
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())))
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

// The counts follow what the checks did on a real checkout: checks, the
// 409s, the full reads (every check with Options.Check "read", none while nothing
// changed otherwise), and the checks that timed out.
func TestStatsCount(t *testing.T) {
	t.Parallel() // repositories and guards of its own; each waits out Git's racy window
	for _, alwaysRead := range []bool{false, true} {
		t.Run(map[bool]string{false: "stat", true: "always read"}[alwaysRead], func(t *testing.T) {
			t.Parallel()
			dir := tempDir(t)
			mod, _ := agentRepo(t, dir)
			// The stat path: a change of the mount table (another
			// process's mount) would make the watch path read again.
			g, err := New(Options{ModulePath: mod, HomeDir: dir, Check: map[bool]string{true: "read", false: "stat"}[alwaysRead]})
			require.NoError(t, err)
			bound := g.Stats()
			assert.Equal(t, Stats{FullReads: bound.FullReads}, bound, "binding is no check")
			require.GreaterOrEqual(t, bound.FullReads, uint64(1), "binding reads the checkout")

			// Past Git's racy window, so that stats prove the files unchanged.
			time.Sleep(1100 * time.Millisecond)
			require.NoError(t, g.EnsureCurrent()) // may read once more: a racy stamp
			settled := g.Stats().FullReads
			const n = 20
			for range n {
				require.NoError(t, g.EnsureCurrent())
			}
			s := g.Stats()
			assert.Equal(t, uint64(n+1), s.Checks)
			assert.Zero(t, s.Stale)
			if alwaysRead {
				assert.Equal(t, settled+n, s.FullReads, "every check reads")
			} else {
				assert.Equal(t, settled, s.FullReads, "an unchanged checkout is not read again")
			}

			commit(t, dir, "run_agent.py", "class AIAgent: v2\n")
			for range 3 {
				require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
			}
			s2 := g.Stats()
			assert.Equal(t, uint64(n+4), s2.Checks)
			assert.Equal(t, uint64(3), s2.Stale, "each stale answer counts")
			assert.Greater(t, s2.FullReads, s.FullReads, "the move is read")
			assert.Zero(t, s2.ReadTimeouts)
			assert.Zero(t, s2.Reloads+s2.ReloadsAbandoned)
		})
	}
}

// An unbound guard's checks count, and nothing else does.
func TestStatsUnbound(t *testing.T) {
	var g Guard
	for range 5 {
		require.NoError(t, g.EnsureCurrent())
	}
	assert.Equal(t, Stats{Checks: 5}, g.Stats())
}

// A check that gives up on a hung read counts as a timeout and a stale
// answer.
func TestStatsReadTimeouts(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	h := &hangingIndex{release: make(chan struct{})}
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir, ReadTimeout: 100 * time.Millisecond, Check: "read"}, h.env())
	require.NoError(t, err)
	h.hang.Store(true)
	for range 2 {
		err := g.EnsureCurrent()
		require.ErrorIs(t, err, ErrReadTimeout)
	}
	s := g.Stats()
	assert.Equal(t, uint64(2), s.ReadTimeouts)
	assert.Equal(t, uint64(2), s.Stale)
	h.hang.Store(false)
	close(h.release)
	timeouts := uint64(2)
	require.Eventually(t, func() bool {
		err := g.EnsureCurrent()
		if errors.Is(err, ErrReadTimeout) {
			timeouts++ // the hung read had not yet returned
		}
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, timeouts, g.Stats().ReadTimeouts, "each timed-out check counts, and no other")
}

// nilCtx is the nil context a careless host passes.
var nilCtx context.Context

// Every exported call that takes a context says at once that a nil one
// is an error, rather than panic on a goroutine of its own later; a
// Reloader with nothing to reload, or a negative duration, is refused too.
func TestNilContextsAreErrors(t *testing.T) {
	c := newReloadCase(t)
	restart := func(context.Context, *Plan) error { return nil }

	rl, err := NewReloader(nilCtx, c.g, ReloaderOptions{Restart: restart})
	assert.ErrorContains(t, err, "nil Context")
	assert.Nil(t, rl)
	_, err = NewReloader(context.Background(), c.g, ReloaderOptions{Restart: restart, DrainTimeout: -time.Second})
	assert.ErrorContains(t, err, "DrainTimeout")
	_, err = NewReloader(context.Background(), c.g, ReloaderOptions{Restart: restart, ProofInterval: -time.Second})
	assert.ErrorContains(t, err, "ProofInterval")
	_, err = NewReloader(context.Background(), c.g, ReloaderOptions{})
	assert.ErrorContains(t, err, "Restart")
	_, err = NewReloader(context.Background(), nil, ReloaderOptions{Restart: restart})
	assert.ErrorContains(t, err, "no guard")

	assert.ErrorContains(t, c.g.Watch(nilCtx, time.Second), "nil Context")
	assert.ErrorContains(t, c.g.Watch(context.Background(), 0), "not positive")
	assert.ErrorContains(t, c.g.Watch(context.Background(), -time.Second), "not positive")

	plan, err := c.g.PlanReload(nilCtx)
	assert.ErrorContains(t, err, "nil Context")
	assert.Nil(t, plan)

	c.success(t)
	plan, err = c.g.PlanReload(context.Background())
	require.NoError(t, err)
	h := &ExecHandover{
		Quiesce: func(context.Context) error { return nil },
		Resume:  func([]net.Listener) error { return nil },
	}
	assert.ErrorContains(t, h.Handover(nilCtx, plan), "nil Context")
	assert.ErrorContains(t, h.Handover(context.Background(), nil), "no plan")
	assert.ErrorContains(t, plan.Bind(nilCtx), "nil Context")
	assert.True(t, plan.isDone(), "the plan is done either way, as Bind's other failures leave it")
	assert.False(t, c.g.bound.Load().plans.isScheduled())
	// The guard can plan again: nothing was spent.
	plan, err = c.g.PlanReload(context.Background())
	require.NoError(t, err)
	plan.Release()

	// The refused Reloaders left nothing behind: one can start.
	ctx, cancel := context.WithCancel(context.Background())
	rl, err = NewReloader(ctx, c.g, ReloaderOptions{Restart: restart})
	require.NoError(t, err)
	cancel()
	<-rl.Done()
}

// A nil handler behind the middleware is http.DefaultServeMux, as it is
// for http.Server: no panic on the request's goroutine.
func TestNilHandlersServeTheDefaultMux(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
	require.NoError(t, err)
	defer g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl, err := NewReloader(ctx, g, ReloaderOptions{Restart: func(context.Context, *Plan) error { return nil }})
	require.NoError(t, err)
	defer func() { cancel(); <-rl.Done() }()
	for name, h := range map[string]http.Handler{"Middleware": g.Middleware(nil), "Wrap": rl.Wrap(nil)} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/runtimeguard-no-such-page", nil))
		body, _ := io.ReadAll(rec.Body)
		assert.Equal(t, http.StatusNotFound, rec.Code, "%s(nil): %s", name, body)
	}
}

// Nil receivers and zero values of every exported type neither panic nor
// block: a nil *Guard is an unbound guard that holds nothing (its checks
// pass, Capture refuses it), a nil or zero Reloader passes requests
// through and is done, and a nil error value names itself.
func TestNilAndZeroValuesNeitherPanicNorBlock(t *testing.T) {
	ctx := context.Background()
	req := func() *http.Request { return httptest.NewRequest("GET", "/", nil) }
	var (
		nilG   *Guard
		zeroRL Reloader
		nilRL  *Reloader
		nilSE  *StaleError
		nilEH  *ExecHandover
		nilOE  *OptionError
		nilPE  *PanicError
		nilIn  *Inherited
	)
	restart := func(context.Context, *Plan) error { return nil }
	served := func(t *testing.T, h http.Handler) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req())
		assert.Equal(t, http.StatusTeapot, rec.Code, "the request reached the handler")
	}
	teapot := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, tc := range []struct {
		name string
		f    func(t *testing.T)
	}{
		{"(*Guard)(nil): unbound, current, holding nothing", func(t *testing.T) {
			assert.NoError(t, nilG.EnsureCurrent())
			assert.Equal(t, Identity{}, nilG.Identity())
			assert.NoError(t, nilG.Close())
			_ = nilG.Paths()
			_ = nilG.Stats()
			_ = nilG.Observe()
			assert.NoError(t, nilG.Watch(ctx, time.Millisecond), "Watch of a guard nothing binds returns at once")
			select {
			case <-nilG.Changed():
				t.Error("the Changed channel of a nil guard is closed")
			default:
			}
			p, err := nilG.PlanReload(ctx)
			assert.ErrorIs(t, err, ErrNotReady)
			p.Release()
			served(t, nilG.Middleware(teapot))
			nilG.LivenessHandler().ServeHTTP(httptest.NewRecorder(), req())
			nilG.ReadinessHandler().ServeHTTP(httptest.NewRecorder(), req())
			assert.True(t, nilG.WriteStale(httptest.NewRecorder(), req(), &StaleError{}))
			assert.ErrorContains(t, nilG.Capture(filepath.Join(tempDir(t), "run_agent.py")), "nil *Guard")
		}},
		{"zero Reloader: passes through, done", func(t *testing.T) {
			served(t, zeroRL.Wrap(teapot))
			select {
			case <-zeroRL.Done():
			default:
				t.Error("the zero Reloader's Done channel is open")
			}
		}},
		{"(*Reloader)(nil): passes through, done", func(t *testing.T) {
			served(t, nilRL.Wrap(teapot))
			select {
			case <-nilRL.Done():
			default:
				t.Error("a nil Reloader's Done channel is open")
			}
		}},
		{"(*StaleError)(nil)", func(t *testing.T) {
			assert.Contains(t, nilSE.Error(), "nil *StaleError")
			assert.NoError(t, nilSE.Unwrap())
			assert.Equal(t, PayloadType, nilSE.Payload().Type)
			assert.Equal(t, http.StatusConflict, nilSE.Problem().Status)
			assert.Equal(t, http.StatusConflict, nilSE.StatusCode())
			_ = nilSE.LogValue()
			assert.False(t, WriteStale(httptest.NewRecorder(), nilSE), "nothing is written for a nil *StaleError")
		}},
		{"zero StaleError", func(t *testing.T) {
			var se StaleError
			_, _, _, _ = se.Error(), se.Payload(), se.Problem(), se.LogValue()
			assert.False(t, WriteStale(httptest.NewRecorder(), nil))
			assert.False(t, WriteStale(httptest.NewRecorder(), errors.New("x")))
			var g Guard
			assert.True(t, g.WriteStale(httptest.NewRecorder(), nil, &se))
		}},
		{"zero and nil Plan", func(t *testing.T) {
			for _, p := range []*Plan{{}, nil} {
				_ = p.Schedule()
				_ = p.Bind(ctx)
				_ = p.LockFile()
				p.Release()
			}
		}},
		{"(*ExecHandover)(nil) and the zero ExecHandover", func(t *testing.T) {
			assert.ErrorContains(t, nilEH.Handover(ctx, &Plan{}), "nil *ExecHandover")
			assert.Error(t, (&ExecHandover{}).Handover(ctx, &Plan{}))
		}},
		{"(*OptionError)(nil), (*PanicError)(nil), zero PanicError", func(t *testing.T) {
			assert.Contains(t, nilOE.Error(), "nil *OptionError")
			assert.Contains(t, nilPE.Error(), "nil *PanicError")
			assert.NoError(t, nilPE.Unwrap())
			var pe PanicError
			_ = pe.Error()
			assert.NoError(t, pe.Unwrap())
		}},
		{"(*Inherited)(nil).Release", func(t *testing.T) { nilIn.Release() }},
		{"zero Guard: every method", func(t *testing.T) {
			var g Guard
			_ = g.EnsureCurrent()
			_ = g.Observe()
			_ = g.Paths()
			_ = g.Stats()
			_ = g.Identity()
			c, cancel := context.WithCancel(ctx)
			cancel()
			_ = g.Watch(c, time.Millisecond)
			p, _ := g.PlanReload(ctx)
			p.Release()
			g.LivenessHandler().ServeHTTP(httptest.NewRecorder(), req())
			g.ReadinessHandler().ServeHTTP(httptest.NewRecorder(), req())
			g.Middleware(nil).ServeHTTP(httptest.NewRecorder(), req())
			_ = g.Capture("")
			_ = g.Close()
			_ = g.Close()
			_ = g.Changed()
		}},
		{"NewReloader on a zero Guard, then stopped", func(t *testing.T) {
			var g Guard
			c, cancel := context.WithCancel(ctx)
			rl, err := NewReloader(c, &g, ReloaderOptions{Restart: restart})
			cancel()
			if assert.NoError(t, err) {
				<-rl.Done()
			}
		}},
		{"options that describe no guard", func(t *testing.T) {
			for _, opts := range []Options{
				{ReadTimeout: -1}, {Check: "bogus"}, {MaxMarkerAge: -1},
				{ModulePath: "a\x00b"}, {HomeDir: "a\x00b"},
				{Layout: GitSyncLayout("")}, {Layout: Layout{Marker: ".."}}, {Layout: Layout{Marker: "/"}},
				{Layout: Layout{Marker: "."}, HomeDir: tempDir(t)},
			} {
				_, _ = Observe(opts)
				if g, err := New(opts); err == nil {
					g.Close()
				}
			}
		}},
		{"Notify of nothing, the empty state words", func(t *testing.T) {
			_ = Notify()
			_ = Notify("")
			_, _ = MarkerState("").String(), UpdateState("").String()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan any, 1)
			go func() {
				defer func() { done <- recover() }()
				tc.f(t)
			}()
			// A bound on a hang, not on speed: every call returns at once.
			select {
			case p := <-done:
				if p != nil {
					t.Fatalf("panics: %v", p)
				}
			case <-time.After(time.Minute):
				t.Fatal("still blocked after a minute")
			}
		})
	}
}

// noRevisionCases are the checkouts that have no current revision, each
// made from a fresh agent repository: what it does to the checkout, and
// the module path a guard would bind to.
var noRevisionCases = []struct {
	name string
	make func(t *testing.T, dir, mod string) string
	// reason is a word of why, as the guard reports it.
	reason string
}{
	{"garbage HEAD", func(t *testing.T, dir, mod string) string {
		writeFile(t, filepath.Join(dir, ".git", "HEAD"), "garbage\n")
		return mod
	}, "worktree"},
	{"deleted index", func(t *testing.T, dir, mod string) string {
		require.NoError(t, os.Remove(filepath.Join(dir, ".git", "index")))
		return mod
	}, "not tracked"},
	{"untracked module", func(t *testing.T, dir, mod string) string {
		other := filepath.Join(dir, "other.py")
		writeFile(t, other, "pass\n")
		return other
	}, "not tracked"},
	{"unborn branch", func(t *testing.T, dir, mod string) string {
		// The only ref goes, and HEAD's reflog with it: a checkout git
		// itself calls an unborn branch, not one being renamed.
		git(t, dir, "update-ref", "-d", "refs/heads/main")
		require.NoError(t, os.RemoveAll(filepath.Join(dir, ".git", "logs")))
		return mod
	}, "unborn"},
}

// mend puts HEAD and the index of the agent repository at dir back, so
// that git names a revision there again.
func mend(t *testing.T, dir, rev string) {
	writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/main\n")
	git(t, dir, "update-ref", "refs/heads/main", rev)
	git(t, dir, "read-tree", "HEAD")
}

func TestInertGuardSaysWhy(t *testing.T) {
	for _, tc := range noRevisionCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // git and a guard on a repository of its own
			dir := tempDir(t)
			mod, rev := agentRepo(t, dir)
			mod = tc.make(t, dir, mod)
			out, err := gittest.Command(dir, "rev-parse", "--verify", "-q", "HEAD").Output()
			if err == nil {
				_, err = gittest.Command(dir, "ls-files", "--error-unmatch", filepath.Base(mod)).Output()
			}
			require.Error(t, err, "git itself names no revision of a tracked module here (%s)", out)

			h := &recordHandler{}
			g, err := New(Options{ModulePath: mod, Logger: slog.New(h)})
			require.NoError(t, err, "without RequireCheckout an inert guard is no error")
			assert.Empty(t, g.Identity().Revision)
			o := g.Observe()
			assert.Contains(t, o.Unguarded, tc.reason, "the observation says why the guard guards nothing")
			require.Len(t, h.records, 1, "one log of the inert binding")
			r := h.records[0]
			assert.Equal(t, slog.LevelWarn, r.Level)
			logged := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { logged[a.Key] = a.Value.String(); return true })
			assert.Contains(t, logged["reason"], tc.reason)
			assert.Equal(t, g.Identity().ModulePath, logged["module"])
			for range 3 {
				assert.NoError(t, g.EnsureCurrent(), "an inert guard lets checks pass")
			}
			assert.Len(t, h.records, 1, "checks of an inert guard log nothing more")
			require.NoError(t, g.Capture(mod))
			assert.Len(t, h.records, 1, "a Capture that finds the same logs nothing more")

			_, err = New(Options{ModulePath: mod, RequireCheckout: true})
			require.ErrorIs(t, err, ErrNotCheckout, "RequireCheckout makes New fail")
			assert.Contains(t, err.Error(), tc.reason)
			assert.Contains(t, err.Error(), mod)

			// Mended, the checkout has a revision again; the inert guard
			// stays inert (the code it guards was loaded at none), and a
			// Capture binds it.
			mend(t, dir, rev)
			if tc.name == "untracked module" {
				git(t, dir, "add", "other.py")
				git(t, dir, "commit", "-q", "-m", "other")
				rev = strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
			}
			assert.NoError(t, g.EnsureCurrent())
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			assert.ErrorIs(t, g.Watch(ctx, 5*time.Millisecond), context.DeadlineExceeded)
			cancel()
			assert.Empty(t, g.Identity().Revision, "a mended checkout binds an inert guard neither by a check nor by Watch")
			assert.NotEmpty(t, g.Observe().Unguarded)
			require.NoError(t, g.Capture(mod))
			assert.Equal(t, rev, g.Identity().Revision, "Capture binds an inert guard anew")
			assert.Empty(t, g.Observe().Unguarded)
		})
	}
}

// TestEveryRejectedOptionIsAnOptionError: each field New rejects, of
// Options and of its Layout, comes back as an *OptionError naming that
// field, the value given and why, and the message says all three once,
// after the package's prefix.
func TestEveryRejectedOptionIsAnOptionError(t *testing.T) {
	withLayout := func(edit func(*Layout)) Options {
		l := HermesLayout
		l.RecoveryMarkers = append([]string(nil), l.RecoveryMarkers...)
		edit(&l)
		return Options{HomeDir: tempDir(t), Layout: l}
	}
	rev := strings.Repeat("a", 40)
	cases := []struct {
		opts  Options
		field string
		value any
	}{
		{Options{MaxMarkerAge: -time.Second}, "Options.MaxMarkerAge", -time.Second},
		{Options{ReadTimeout: -time.Millisecond}, "Options.ReadTimeout", -time.Millisecond},
		{Options{Check: "stats"}, "Options.Check", "stats"},
		{Options{Check: "Watch"}, "Options.Check", "Watch"},
		{Options{Message: "Update was a success"}, "Options.Message", "Update was a success"},
		{Options{ReloadMessage: "SUCCESS soon"}, "Options.ReloadMessage", "SUCCESS soon"},
		{Options{AgentName: "Successful Agent"}, "Options.AgentName", "Successful Agent"},
		{Options{ServerName: "Successor"}, "Options.ServerName", "Successor"},
		{Options{ExpectRevision: "abc", ModulePath: "x.py"}, "Options.ExpectRevision", "abc"},
		{Options{ExpectRevision: rev}, "Options.ExpectRevision", rev},
		{Options{ExpectReceipt: "update_id:1"}, "Options.ExpectReceipt", "update_id:1"},
		{Options{ExpectReceipt: "update_id:1", ExpectRevision: rev}, "Options.ExpectRevision", rev},
		// A guard that binds nothing at New could not require anything
		// of a checkout, and would say nothing.
		{Options{RequireCheckout: true}, "Options.RequireCheckout", true},
		{Options{RequireCheckout: true, HomeDir: tempDir(t), Python: "python3"}, "Options.RequireCheckout", true},
		{withLayout(func(l *Layout) { l.Marker = "" }), "Layout.Marker", ""},
		{withLayout(func(l *Layout) { l.Marker = "../marker" }), "Layout.Marker", "../marker"},
		{withLayout(func(l *Layout) { l.DefaultHome = "/abs" }), "Layout.DefaultHome", "/abs"},
		{withLayout(func(l *Layout) { l.Receipt = "../r.json" }), "Layout.Receipt", "../r.json"},
		{withLayout(func(l *Layout) { l.Lock = "../lock" }), "Layout.Lock", "../lock"},
		{withLayout(func(l *Layout) { l.Checkout = "../hermes-agent" }), "Layout.Checkout", "../hermes-agent"},
		{withLayout(func(l *Layout) { l.ReceiptHistory = "lo*gs/update_*.json" }), "Layout.ReceiptHistory", "lo*gs/update_*.json"},
		{withLayout(func(l *Layout) { l.ReceiptHistory = "logs/update_[.json" }), "Layout.ReceiptHistory", "logs/update_[.json"},
		{withLayout(func(l *Layout) { l.Profiles = "a/b" }), "Layout.Profiles", "a/b"},
		{withLayout(func(l *Layout) { l.RecoveryMarkers = []string{"ok", "a/b"} }), "Layout.RecoveryMarkers", "a/b"},
		{withLayout(func(l *Layout) { l.RecoveryMarkers = []string{""} }), "Layout.RecoveryMarkers", ""},
		// A git-sync deployment whose --link did not reach the server is
		// not the Hermes layout.
		{Options{HomeDir: tempDir(t), Layout: GitSyncLayout("")}, "Layout.Link", ""},
	}
	for _, c := range cases {
		for name, call := range map[string]func(Options) error{
			"New":     func(o Options) error { _, err := New(o); return err },
			"Observe": func(o Options) error { _, err := Observe(o); return err },
		} {
			err := call(c.opts)
			var oe *OptionError
			if !assert.ErrorAs(t, err, &oe, "%s: %s %#v", name, c.field, c.value) {
				continue
			}
			assert.Equal(t, c.field, oe.Field, "%s: %v", name, err)
			assert.Equal(t, c.value, oe.Value, "%s: %v", name, err)
			assert.NotEmpty(t, oe.Reason, "%s: %v", name, err)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, "runtimeguard: "+c.field+" "), "%s: %q", name, msg)
			assert.Equal(t, 1, strings.Count(msg, "runtimeguard:"), "%s: the prefix once: %q", name, msg)
			assert.Contains(t, msg, oe.Reason, name)
		}
	}
}

// TestOptionErrorIsNotAReadError: an error reading the checkout is no
// OptionError, so a caller can tell its configuration from its disk.
func TestOptionErrorIsNotAReadError(t *testing.T) {
	_, err := New(Options{ModulePath: filepath.Join(tempDir(t), "missing.py")})
	require.Error(t, err)
	var oe *OptionError
	assert.False(t, errors.As(err, &oe), "%v", err)
}

// resolvePaths is what a tool does for the paths of opts: a guard with no
// module, which reads nothing.
func resolvePaths(opts Options) (Paths, error) {
	g, err := New(opts)
	if err != nil {
		return Paths{}, err
	}
	defer g.Close()
	return g.Paths(), nil
}

// TestPathsAreTheResolutionNewMade: Guard.Paths, also of a guard with no
// module, says
// where the guard reads, as it reads there: made absolute and with the
// defaults applied once, at New, so that a later change of the working
// directory or of the home's variable moves nothing the guard reads or
// reports.
func TestPathsAreTheResolutionNewMade(t *testing.T) {
	tmp := tempDir(t)
	home := filepath.Join(tmp, "home")
	gittest.WriteMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
	t.Setenv("HERMES_HOME", "home")
	t.Chdir(tmp)
	opts := Options{Python: filepath.Join("install", ".venv", "bin", "python3")}
	resolvedPaths, err := resolvePaths(opts)
	require.NoError(t, err)
	g, err := New(opts)
	require.NoError(t, err)

	t.Chdir(os.TempDir())
	t.Setenv("HERMES_HOME", filepath.Join(tmp, "elsewhere"))
	want := Paths{
		Home:            home,
		Marker:          filepath.Join(home, hermesMarker),
		Receipt:         filepath.Join(home, "logs", "update_receipts", "latest.json"),
		ReceiptHistory:  filepath.Join(home, "logs", "update_receipts", "update_*.json"),
		Python:          filepath.Join(tmp, "install", ".venv", "bin", "python3"),
		InstallRoot:     filepath.Join(tmp, "install"),
		RecoveryMarkers: []string{hermesIncomplete, hermesLazy},
	}
	assert.Equal(t, want, g.Paths())
	assert.Equal(t, want, resolvedPaths)

	// What the guard reads is where Paths says.
	o := g.Observe()
	assert.Equal(t, want.Marker, o.MarkerPath)
	assert.Equal(t, MarkerActive, o.Marker)
	assert.Equal(t, []string{want.InstallRoot}, o.InstallRoots)
	assert.Equal(t, want.Receipt, o.ReceiptPath)

	// A copy: a caller's edit changes nothing the guard holds.
	p := g.Paths()
	p.RecoveryMarkers[0] = "changed"
	assert.Equal(t, want.RecoveryMarkers, g.Paths().RecoveryMarkers)

	// No home known: no paths in it.
	t.Setenv("HERMES_HOME", "")
	t.Setenv("HOME", "")
	t.Setenv("USERPROFILE", "")
	p, err = resolvePaths(Options{})
	require.NoError(t, err)
	assert.Equal(t, Paths{RecoveryMarkers: want.RecoveryMarkers}, p)

	// A layout without a receipt, a history or a lock has none of them.
	p, err = resolvePaths(Options{HomeDir: home, Layout: Layout{Marker: "m"}})
	require.NoError(t, err)
	assert.Equal(t, Paths{Home: home, Marker: filepath.Join(home, "m"), RecoveryMarkers: []string{}}, p)
}

// A piece of the package's executors' work that panics is reported as a
// *PanicError that unwraps to the error it panicked with; a piece that
// ended its goroutine keeps its error.
func TestPieceErrIsAPanicError(t *testing.T) {
	x := checkoutExecutor(filepath.Join("nowhere", "module")) // keyed by the path: nothing is read
	tk, s := bounded.Submit(context.Background(), x, nil, time.Minute, func(*bounded.Task[int]) { panic(errors.New("the reader broke")) }, nil)
	require.Nil(t, s)
	var pe *PanicError
	require.ErrorAs(t, tk.Err, &pe)
	assert.EqualError(t, pe.Unwrap(), "the reader broke")
	assert.NotEmpty(t, pe.Stack)
	assert.ErrorContains(t, pe, "runtimeguard: read panicked: the reader broke")

	tk, s = bounded.Submit(context.Background(), x, nil, time.Minute, func(*bounded.Task[int]) { runtime.Goexit() }, nil)
	require.Nil(t, s)
	assert.ErrorIs(t, tk.Err, bounded.ErrExited)
}

// hangingIndex is the system environment with a read of the index that
// blocks while hang is set, as a read on a hard NFS mount that lost its
// server does; it counts the reads blocked at once.
type hangingIndex struct {
	hang              atomic.Bool
	release           chan struct{}
	blocked, maxBlock atomic.Int32
}

func (h *hangingIndex) env() *env {
	e := testEnv(nil)
	e.git = onIndexRead(func() {
		if h.hang.Load() {
			n := h.blocked.Add(1)
			for {
				m := h.maxBlock.Load()
				if n <= m || h.maxBlock.CompareAndSwap(m, n) {
					break
				}
			}
			<-h.release
			h.blocked.Add(-1)
		}
	})
	return e
}

// onIndexRead is the system's file system calling fn before each read of
// an index, whole or opened to be read through a buffer.
func onIndexRead(fn func()) *gitread.FS {
	fsys := *gitread.System
	fsys.ReadFile = func(path string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		if filepath.Base(path) == "index" {
			fn()
		}
		return fsread.ReadRegular(path, limit, nofollow)
	}
	fsys.Open = func(path string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
		if filepath.Base(path) == "index" {
			fn()
		}
		return gitread.System.Open(path, limit, nofollow)
	}
	return &fsys
}

// A read that never returns costs one goroutine: every check meanwhile
// fails closed within ReadTimeout, naming the timeout, and once the read
// returns the next check reads again and is current.
func TestHungReadCostsOneGoroutine(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	h := &hangingIndex{release: make(chan struct{})}
	const timeout = 300 * time.Millisecond
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir, ReadTimeout: timeout, Check: "read"}, h.env())
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())

	h.hang.Store(true)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := g.EnsureCurrent()
			assert.ErrorIs(t, err, ErrStale)
			assert.ErrorIs(t, err, ErrReadTimeout)
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), h.maxBlock.Load(), "reads blocked at once")

	// A read stuck for longer than the timeout fails later checks at once.
	start := time.Now()
	assert.ErrorIs(t, g.EnsureCurrent(), ErrReadTimeout)
	assert.Less(t, time.Since(start), timeout, "a check behind a read stuck past the timeout waited for it")

	h.hang.Store(false)
	close(h.release)
	// The stuck read returns; checks read again and are current (one
	// that meets the old read still winding down may fail closed).
	require.Eventually(t, func() bool { return g.EnsureCurrent() == nil }, 10*time.Second, time.Millisecond,
		"a check after the stuck read returned")
	assert.Equal(t, int32(0), h.blocked.Load())
}

// New waits no longer than ReadTimeout for a read either.
func TestNewGivesUpOnAHungRead(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	h := &hangingIndex{release: make(chan struct{})}
	defer close(h.release)
	h.hang.Store(true)
	_, err := newGuard(Options{ModulePath: module, HomeDir: dir, ReadTimeout: 100 * time.Millisecond}, h.env())
	assert.ErrorIs(t, err, ErrReadTimeout)
	assert.ErrorContains(t, err, "100ms")
}

// A panic in a read fails the check closed and keeps its value and stack.
func TestPanicInReadKeepsItsStack(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e := testEnv(nil)
	var boom atomic.Bool
	e.git = onIndexRead(func() {
		if boom.Load() {
			panic("index reader exploded")
		}
	})
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir, Check: "read"}, e)
	require.NoError(t, err)
	boom.Store(true)
	err = g.EnsureCurrent()
	require.ErrorIs(t, err, ErrStale)
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "index reader exploded", pe.Value)
	assert.True(t, strings.Contains(string(pe.Stack), "TestPanicInReadKeepsItsStack"), "the stack names the function that panicked:\n%s", pe.Stack)
	boom.Store(false)
	assert.NoError(t, g.EnsureCurrent())
}

// A read that panicked with an error unwraps to it: a host's errors.Is
// sees through the panic; any other value unwraps to nothing.
func TestPanicErrorUnwrapsAnError(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e := testEnv(nil)
	var boom atomic.Pointer[any]
	e.git = onIndexRead(func() {
		if v := boom.Load(); v != nil {
			panic(*v)
		}
	})
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir, Check: "read"}, e)
	require.NoError(t, err)
	var v any = fmt.Errorf("decoding the index: %w", io.ErrUnexpectedEOF)
	boom.Store(&v)
	err = g.EnsureCurrent()
	require.ErrorIs(t, err, ErrStale)
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the panic's error is in the chain")
	v = "not an error"
	boom.Store(&v)
	err = g.EnsureCurrent()
	require.ErrorAs(t, err, &pe)
	assert.Nil(t, errors.Unwrap(pe), "a value that is no error unwraps to nothing")
}

// checkWithin runs a check in a goroutine and fails the test if it panics
// or does not return.
func checkWithin(t *testing.T, g *Guard) error {
	t.Helper()
	type result struct {
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{panic: p}
			}
		}()
		done <- result{err: g.EnsureCurrent()}
	}()
	select {
	case r := <-done:
		require.Nil(t, r.panic, "EnsureCurrent panicked")
		return r.err
	case <-time.After(60 * time.Second):
		t.Fatal("EnsureCurrent did not return")
		return nil
	}
}

// Each fault, after binding, either stays current when HEAD truly did not
// move or fails closed with the update state, and never panics or hangs.
func TestFaultMatrix(t *testing.T) {
	cases := []struct {
		name  string
		fault func(t *testing.T, dir string)
		stale bool
	}{
		{".git removed", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, ".git")))
		}, true},
		{"HEAD emptied", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "")
		}, true},
		{"HEAD garbage", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "\x00\xff garbage that is no ref\n")
		}, true},
		{"HEAD a short id", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "abc123\n")
		}, true},
		{"HEAD at a missing ref", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/nowhere\n")
		}, true},
		{"HEAD a symref loop", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/loop\n")
			writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "loop"), "ref: refs/heads/loop\n")
		}, true},
		{"HEAD a directory", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, ".git", "HEAD")))
			require.NoError(t, os.Mkdir(filepath.Join(dir, ".git", "HEAD"), 0o755))
		}, true},
		{"branch ref garbage", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "main"), "not an object id\n")
		}, true},
		{".git a file pointing nowhere", func(t *testing.T, dir string) {
			require.NoError(t, os.Rename(filepath.Join(dir, ".git"), filepath.Join(dir, "..", "elsewhere")))
			writeFile(t, filepath.Join(dir, ".git"), "gitdir: /nonexistent/runtimeguard/gitdir\n")
		}, true},
		{".git a file of garbage", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, ".git")))
			writeFile(t, filepath.Join(dir, ".git"), "\xff\xfe\x00")
		}, true},
		{"index truncated", func(t *testing.T, dir string) {
			index := filepath.Join(dir, ".git", "index")
			data, err := os.ReadFile(index)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(index, data[:len(data)/2], 0o644))
		}, true},
		{"index signature corrupted", func(t *testing.T, dir string) {
			// Not a byte of an entry's stat data, which git reads as
			// any other value (the checksum is verified only by fsck).
			index := filepath.Join(dir, ".git", "index")
			data, err := os.ReadFile(index)
			require.NoError(t, err)
			data[0] ^= 0xff
			require.NoError(t, os.WriteFile(index, data, 0o644))
			require.Error(t, gittest.Command(dir, "ls-files").Run(), "git refuses the index")
		}, true},
		{"index removed", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, ".git", "index")))
		}, true},
		{"config garbage", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".git", "config"), "[core\n\x00")
		}, true},
		{"packed-refs garbage while the branch is packed", func(t *testing.T, dir string) {
			git(t, dir, "pack-refs", "--all")
			writeFile(t, filepath.Join(dir, ".git", "packed-refs"), "\xff\x00 refs/heads/main\n")
		}, true},
		{"replaced by another repository", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(dir))
			agentRepo(t, dir)
			commit(t, dir, "run_agent.py", "another history\n")
		}, true},
		{"replaced by a clone at the same commit", func(t *testing.T, dir string) {
			clone := dir + "-clone"
			git(t, filepath.Dir(dir), "clone", "-q", dir, clone)
			require.NoError(t, os.RemoveAll(dir))
			require.NoError(t, os.Rename(clone, dir))
		}, false},
		{"module file deleted", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "run_agent.py")))
		}, false},
		{"source directory removed", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(dir))
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp := tempDir(t)
			dir := filepath.Join(tmp, "agent")
			module, _ := agentRepo(t, dir)
			home := filepath.Join(tmp, "home")
			require.NoError(t, os.MkdirAll(home, 0o755))
			writeFile(t, filepath.Join(dir, hermesIncomplete), "")
			g, err := New(Options{ModulePath: module, HomeDir: home})
			require.NoError(t, err)
			require.NoError(t, checkWithin(t, g))

			tc.fault(t, dir)
			for i := 0; i < 2; i++ { // the read, then the fast path
				err := checkWithin(t, g)
				if !tc.stale {
					assert.NoError(t, err)
					continue
				}
				var se *StaleError
				require.ErrorAs(t, err, &se)
				want := UpdateIncomplete
				if _, statErr := os.Stat(filepath.Join(dir, hermesIncomplete)); statErr != nil {
					want = UpdateUnverified // the fault removed the recovery marker with the checkout
				}
				assert.Equal(t, want, se.State)
			}
		})
	}
}

// A checkout with 100,000 packed refs: current while nothing moves, stale
// once the branch does.
func TestManyPackedRefs(t *testing.T) {
	dir := tempDir(t)
	module, rev := agentRepo(t, dir)
	var packed bytes.Buffer
	packed.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(&packed, "%s refs/tags/t%06d\n", rev, i)
	}
	fmt.Fprintf(&packed, "%s refs/tags/zz\n", rev)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "packed-refs"), packed.Bytes(), 0o644))
	git(t, dir, "pack-refs", "--all") // the branch joins them, sorted
	require.NoFileExists(t, filepath.Join(dir, ".git", "refs", "heads", "main"))

	g, err := New(Options{ModulePath: module, HomeDir: dir})
	require.NoError(t, err)
	assert.Equal(t, rev, g.Identity().Revision)
	assert.NoError(t, checkWithin(t, g))
	commit(t, dir, "run_agent.py", "moved\n")
	assert.ErrorIs(t, checkWithin(t, g), ErrStale)
}

// treeDigest lists every file under root with its mode and a hash of its
// content: what a read-only guard must leave as it was.
func treeDigest(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", p, info.Mode())
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		out = append(out, line)
		return nil
	})
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// Thousands of checks and classifications leave the checkout, its .git and
// the home byte-identical, with no file created.
func TestGuardIsReadOnly(t *testing.T) {
	tmp := tempDir(t)
	dir, home := filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
	module, _ := agentRepo(t, dir)
	writeFile(t, filepath.Join(dir, hermesLazy), "")
	gittest.WriteMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
	g, err := New(Options{ModulePath: module, HomeDir: home, Python: filepath.Join(tmp, "venv", "bin", "python")})
	require.NoError(t, err)
	commit(t, dir, "run_agent.py", "moved\n") // stale: the update state is read too

	before := treeDigest(t, tmp)
	for i := 0; i < 2000; i++ {
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		require.Equal(t, MarkerActive, readMarker(filepath.Join(home, hermesMarker)))
	}
	for i := 0; i < 200; i++ {
		_, err := gitread.Inspect(module)
		require.NoError(t, err)
		_ = g.Observe()
	}
	assert.Equal(t, before, treeDigest(t, tmp))
}

// The builds the stamps of the tests name.
const (
	buildA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	buildB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// checkPaths are the ways a check proves an unchanged install unchanged,
// each with the Options.Check that asks for it and the environment it
// runs in: the watch path (Linux), the stat path with the real clock (a
// read while the files are recent) and with a settled one (stats only),
// and a full read on every check.
var checkPaths = []struct {
	name, check string
	env         func(t testing.TB) *env
}{
	{"watch", "", watchEnv},
	{"stat", "stat", func(testing.TB) *env { return testEnv(nil) }},
	{"stat-settled", "stat", func(testing.TB) *env { return settledEnv() }},
	{"read", "read", func(testing.TB) *env { return testEnv(nil) }},
}

// guardOn binds a guard with opts on the check path p (Options.Check set
// to p's), and checks once it took it.
func guardOn(t *testing.T, p int, opts Options) *Guard {
	t.Helper()
	path := checkPaths[p]
	opts.Check = path.check
	if opts.HomeDir == "" {
		opts.HomeDir = tempDir(t)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g, err := newGuard(opts, path.env(t))
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	require.NoError(t, g.EnsureCurrent())
	want := map[string]string{"watch": "watch", "read": "read"}[path.name]
	if want == "" {
		want = "stat"
	}
	for i := 0; i < 3 && g.Observe().Check != want; i++ {
		require.NoError(t, g.EnsureCurrent()) // a first read of fresh files is read once more
	}
	require.Equal(t, want, g.Observe().Check, "the guard takes the %s path (%s)", path.name, g.Observe().CheckReason)
	return g
}

// installCase is a change made to an install without Git, bound with the
// stamp naming build (none where it is empty), and what the next check
// says of it: stale, its StaleError's Current and a word of its Err.
type installCase struct {
	name    string
	build   string
	change  func(t *testing.T, module string)
	stale   bool
	current string
	why     string
}

// runInstallCases runs each case on every check path: the check after the
// change says what the case says, and the one after that agrees.
func runInstallCases(t *testing.T, cases []installCase, setup func(t *testing.T, build string) (configured, module string)) {
	for p, path := range checkPaths {
		for _, tc := range cases {
			t.Run(path.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				configured, module := setup(t, tc.build)
				g := guardOn(t, p, Options{ModulePath: configured})
				require.Equal(t, tc.build, g.Identity().Revision, "the revision is the stamp's build")
				for range 3 {
					require.NoError(t, g.EnsureCurrent(), "an unchanged install is current")
				}
				tc.change(t, module)
				err := g.EnsureCurrent()
				if !tc.stale {
					require.NoError(t, err)
					require.NoError(t, g.EnsureCurrent(), "and the check after that agrees")
					return
				}
				var se *StaleError
				require.ErrorAs(t, err, &se)
				assert.ErrorIs(t, err, ErrStale)
				assert.Equal(t, tc.build, se.Captured)
				assert.Equal(t, tc.current, se.Current)
				if tc.why != "" {
					require.Error(t, se.Err)
					assert.Contains(t, se.Err.Error(), tc.why)
				}
				assert.Equal(t, defaultMessage, se.Message, "the 409's message is the guard's own")
				rec := httptest.NewRecorder()
				WriteStale(rec, err)
				assert.Equal(t, 409, rec.Code)
				assert.ErrorIs(t, g.EnsureCurrent(), ErrStale, "and the check after that agrees")
			})
		}
	}
}

// stampOf is the path of the build stamp beside module.
func stampOf(module string) string { return filepath.Join(filepath.Dir(module), gittest.StampFile) }

// sameFile reports whether change left the same file at path, as the
// file system names files (os.SameFile would not do on Windows, where a
// FileInfo asks for its file's ID by its path, and so after the change).
func sameFile(t *testing.T, path string, change func()) bool {
	t.Helper()
	id := func() string {
		st, err := fsread.LstatStamp(path)
		require.NoError(t, err)
		id, err := fsread.FileID(path, st)
		require.NoError(t, err)
		require.NotEmpty(t, id)
		return id
	}
	before := id()
	change()
	return id() == before
}

func TestInstallWithoutGit(t *testing.T) {
	cases := []installCase{
		{name: "unchanged", build: buildA, change: func(*testing.T, string) {}},
		{name: "a write in place of the module", build: buildA, change: func(t *testing.T, module string) {
			require.True(t, sameFile(t, module, func() { gittest.Overwrite(t, module, "class AIAgent: edited = True\n") }), "the edit is in place")
		}},
		{name: "a write in place of the module of a file alone", change: func(t *testing.T, module string) {
			gittest.Overwrite(t, module, "class AIAgent: edited = True\n")
		}},
		{name: "the module touched and its mode changed", build: buildA, change: func(t *testing.T, module string) {
			later := time.Now().Add(time.Hour)
			require.NoError(t, os.Chtimes(module, later, later))
			require.NoError(t, os.Chmod(module, 0o600))
		}},
		{name: "a file written beside the module", build: buildA, change: func(t *testing.T, module string) {
			writeFile(t, filepath.Join(filepath.Dir(module), "notes.txt"), "x\n")
			require.NoError(t, os.MkdirAll(filepath.Join(filepath.Dir(module), "__pycache__"), 0o755))
		}},
		{name: "the stamp rewritten naming the same build", build: buildA, change: func(t *testing.T, module string) {
			gittest.Replace(t, stampOf(module), gittest.Stamp(buildA, map[string]any{"builtAt": "2026-02-02T00:00:00+00:00", "distribution": "nix"}))
		}},
		{name: "a placeholder stamp made beside a file alone", change: func(t *testing.T, module string) {
			writeFile(t, stampOf(module), gittest.Stamp(strings.Repeat("0", 40), map[string]any{"source": "fallback"}))
		}},

		{name: "another file renamed over the module", build: buildA, change: func(t *testing.T, module string) {
			require.False(t, sameFile(t, module, func() { gittest.Replace(t, module, "class AIAgent: pass\n") }), "the rename put another file there")
		}, stale: true, why: "another file"},
		{name: "another file renamed over the module of a file alone", change: func(t *testing.T, module string) {
			gittest.Replace(t, module, "class AIAgent: pass\n")
		}, stale: true, why: "another file"},
		{name: "the module removed", build: buildA, change: func(t *testing.T, module string) {
			require.NoError(t, os.Remove(module))
		}, stale: true, why: "no file"},
		{name: "the stamp renamed over, naming another build", build: buildA, change: func(t *testing.T, module string) {
			gittest.Replace(t, stampOf(module), gittest.Stamp(buildB, nil))
		}, stale: true, current: buildB},
		{name: "the stamp rewritten in place, naming another build", build: buildA, change: func(t *testing.T, module string) {
			gittest.Overwrite(t, stampOf(module), gittest.Stamp(buildB, nil))
		}, stale: true, current: buildB},
		{name: "the stamp removed", build: buildA, change: func(t *testing.T, module string) {
			require.NoError(t, os.Remove(stampOf(module)))
		}, stale: true, why: "no build stamp"},
		{name: "the stamp naming the placeholder", build: buildA, change: func(t *testing.T, module string) {
			gittest.Replace(t, stampOf(module), gittest.Stamp(strings.Repeat("0", 40), nil))
		}, stale: true, why: "zeros"},
		{name: "the stamp without its updateMechanism", build: buildA, change: func(t *testing.T, module string) {
			gittest.Replace(t, stampOf(module), strings.Replace(gittest.Stamp(buildA, nil), `"updateMechanism"`, `"mechanism"`, 1))
		}, stale: true, why: "updateMechanism"},
		{name: "a stamp made beside a file alone", change: func(t *testing.T, module string) {
			writeFile(t, stampOf(module), gittest.Stamp(buildB, nil))
		}, stale: true, current: buildB},
	}
	runInstallCases(t, cases, func(t *testing.T, build string) (string, string) {
		module := gittest.Install(t, filepath.Join(tempDir(t), "agent"), build)
		return module, module
	})
}

// A guard bound to an install without Git says so: how it identifies the
// install, why Git does not, and, once at Warn, that it binds so.
func TestInstallWithoutGitSaysHowItIsIdentified(t *testing.T) {
	for _, tc := range []struct {
		name, build, by string
	}{
		{"build stamp", buildA, "build stamp"},
		{"file alone", "", "file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(tempDir(t), "agent")
			module := gittest.Install(t, dir, tc.build)
			h := &recordHandler{}
			g, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Logger: slog.New(h)})
			require.NoError(t, err)
			defer g.Close()
			id := g.Identity()
			assert.Equal(t, Identity{SourceDir: resolved(t, dir), ModulePath: resolved(t, module), Revision: tc.build}, id)
			o := g.Observe()
			assert.Equal(t, tc.by, o.IdentifiedBy)
			assert.Contains(t, o.Unguarded, "no Git worktree holds", "why Git does not identify it")
			assert.NotEmpty(t, o.Check, "its checks take a path")
			require.Len(t, h.records, 1, "one log of the binding without Git")
			assert.Contains(t, h.records[0].Message, "by its "+tc.by)

			_, err = New(Options{ModulePath: module, RequireCheckout: true})
			assert.ErrorIs(t, err, ErrNotCheckout, "RequireCheckout asks for a Git checkout")
			_, err = New(Options{ModulePath: module, ExpectRevision: strings.Repeat("a", 40)})
			assert.ErrorIs(t, err, ErrNotCheckout, "ExpectRevision asks for a Git checkout, whatever the stamp names")
		})
	}
	t.Run("git", func(t *testing.T) {
		t.Parallel()
		module, rev := agentRepo(t, tempDir(t))
		g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
		require.NoError(t, err)
		defer g.Close()
		o := g.Observe()
		assert.Equal(t, "git", o.IdentifiedBy)
		assert.Empty(t, o.Unguarded)
		assert.Equal(t, rev, g.Identity().Revision)
	})
}

// A checkout that Git identifies is bound by Git, whatever its build stamp
// says: Git sees every move of a checkout, and a stamp written at install
// may not follow a git pull.
func TestGitCheckoutWithAStampIsBoundByGit(t *testing.T) {
	dir := tempDir(t)
	module, rev := agentRepo(t, dir)
	writeFile(t, stampOf(module), gittest.Stamp(buildA, nil))
	g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
	require.NoError(t, err)
	defer g.Close()
	assert.Equal(t, rev, g.Identity().Revision)
	assert.Equal(t, "git", g.Observe().IdentifiedBy)
	gittest.Replace(t, stampOf(module), gittest.Stamp(buildB, nil))
	assert.NoError(t, g.EnsureCurrent(), "a stamp of a Git checkout is not its identity")
	commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
}

// The seed's rules: an install without Git keeps working, and a change in
// an unrelated outer repository (the module untracked inside it) changes
// nothing, nor does that repository's tracking the module later, or a
// repository made in the install: the code the server loaded came from
// none. On every check path.
func TestInstallInsideAnOuterRepository(t *testing.T) {
	cases := []installCase{
		{name: "a commit of the outer repository", change: func(t *testing.T, module string) {
			outer := filepath.Dir(filepath.Dir(filepath.Dir(module)))
			commit(t, outer, "tracked.txt", "unrelated change\n")
		}},
		{name: "the outer repository tracks the module", build: buildA, change: func(t *testing.T, module string) {
			outer := filepath.Dir(filepath.Dir(filepath.Dir(module)))
			git(t, outer, "add", "--", filepath.Join("installed", "hermes-agent", "run_agent.py"))
			git(t, outer, "commit", "-q", "-m", "track the install")
		}},
		{name: "a repository made in the install", build: buildA, change: func(t *testing.T, module string) {
			initRepo(t, filepath.Dir(module), nil)
			git(t, filepath.Dir(module), "add", "run_agent.py")
			git(t, filepath.Dir(module), "commit", "-q", "-m", "track")
		}},
		{name: "another file renamed over the module", change: func(t *testing.T, module string) {
			gittest.Replace(t, module, "class AIAgent: pass\n")
		}, stale: true, why: "another file"},
	}
	runInstallCases(t, cases, func(t *testing.T, build string) (string, string) {
		outer := filepath.Join(tempDir(t), "outer-repo")
		initRepo(t, outer, map[string]string{"tracked.txt": "unrelated\n"})
		module := gittest.Install(t, filepath.Join(outer, "installed", "hermes-agent"), build)
		return module, module
	})
}

// A guard bound to an install without Git binds anew on Capture, once the
// host loaded the module again: a move, then a Capture, then current.
func TestInstallCaptureBindsAnew(t *testing.T) {
	dir := filepath.Join(tempDir(t), "agent")
	module := gittest.Install(t, dir, buildA)
	g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
	require.NoError(t, err)
	defer g.Close()
	gittest.Replace(t, module, "class AIAgent: v2 = True\n")
	gittest.Replace(t, stampOf(module), gittest.Stamp(buildB, nil))
	require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
	require.NoError(t, g.Capture(module), "the host loaded the module again")
	assert.Equal(t, buildB, g.Identity().Revision)
	assert.NoError(t, g.EnsureCurrent())
}

// The directory of HermesLayout's stamp is the one HERMES_INSTALL_ROOT
// names where it is set, as Hermes's Nix wrapper and desktop app set it.
func TestInstallStampInTheInstallRootTheEnvironmentNames(t *testing.T) {
	root := tempDir(t)
	writeFile(t, filepath.Join(root, gittest.StampFile), gittest.Stamp(buildA, nil))
	module := gittest.Install(t, filepath.Join(tempDir(t), "site-packages"), "")
	writeFile(t, stampOf(module), gittest.Stamp(buildB, nil)) // not read: the environment names another
	t.Setenv("HERMES_INSTALL_ROOT", root)
	g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
	require.NoError(t, err)
	defer g.Close()
	assert.Equal(t, buildA, g.Identity().Revision)
	assert.Equal(t, "build stamp", g.Observe().IdentifiedBy)
	gittest.Replace(t, filepath.Join(root, gittest.StampFile), gittest.Stamp(buildB, nil))
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, buildB, se.Current)

	t.Setenv("HERMES_INSTALL_ROOT", "")
	g2, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
	require.NoError(t, err)
	defer g2.Close()
	assert.Equal(t, buildB, g2.Identity().Revision, "unset, the stamp beside the module counts")

	// A layout names its own stamp, or none.
	layout := HermesLayout
	layout.Stamp = ""
	g3, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Layout: layout})
	require.NoError(t, err)
	defer g3.Close()
	assert.Empty(t, g3.Identity().Revision)
	assert.Equal(t, "file", g3.Observe().IdentifiedBy)
	t.Setenv("HERMES_INSTALL_ROOT", root)
	g5, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Layout: layout})
	require.NoError(t, err, "a layout without a stamp reads none, wherever HERMES_INSTALL_ROOT leads")
	defer g5.Close()
	assert.Empty(t, g5.Identity().Revision)
	t.Setenv("HERMES_INSTALL_ROOT", "")
	layout.Stamp = "BUILD.json"
	writeFile(t, filepath.Join(filepath.Dir(module), "BUILD.json"), gittest.Stamp(buildA, nil))
	g4, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Layout: layout})
	require.NoError(t, err)
	defer g4.Close()
	assert.Equal(t, buildA, g4.Identity().Revision)
}

func TestLayoutStampValidation(t *testing.T) {
	module := gittest.Install(t, tempDir(t), "")
	for _, tc := range []struct {
		name  string
		edit  func(l *Layout)
		field string
	}{
		{"a stamp outside the module's directory", func(l *Layout) { l.Stamp = "../install-stamp.json" }, "Layout.Stamp"},
		{"an absolute stamp", func(l *Layout) { l.Stamp = string(filepath.Separator) + "install-stamp.json" }, "Layout.Stamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := HermesLayout
			tc.edit(&l)
			_, err := New(Options{ModulePath: module, Layout: l})
			var oe *OptionError
			require.True(t, errors.As(err, &oe), "New = %v, want an *OptionError", err)
			assert.Equal(t, tc.field, oe.Field)
		})
	}
}

// checkoutEnv names a checkout the host made for the Windows tests (under
// Wine, where there is no git binary): "DIR;REVISION".
const checkoutEnv = "RUNTIMEGUARD_TEST_CHECKOUT"

// TestWindowsGuardOnCheckout reads a real checkout through Windows paths,
// binds to it, and sees a ref move through the stat fast path.
func TestWindowsGuardOnCheckout(t *testing.T) {
	if runtime.GOOS != "windows" {
		t.Skip("Windows paths: a test of Windows")
	}
	var src, rev string
	if v := os.Getenv(checkoutEnv); v != "" {
		parts := strings.SplitN(v, ";", 2)
		require.Len(t, parts, 2, "%s=%q", checkoutEnv, v)
		// Work on a copy: the test moves the branch.
		src, rev = filepath.Join(tempDir(t), "agent"), parts[1]
		require.NoError(t, os.CopyFS(src, os.DirFS(parts[0])))
	} else if _, err := exec.LookPath("git"); err == nil {
		src = filepath.Join(tempDir(t), "agent")
		_, rev = agentRepo(t, src)
	} else {
		t.Skipf("no git binary, and %s names no checkout", checkoutEnv)
	}
	module := filepath.Join(src, "run_agent.py")
	got, err := inspectRevision(module)
	require.NoError(t, err)
	require.Equal(t, rev, got)

	e := testEnv(nil)
	e.now = func() time.Time { return time.Now().Add(time.Hour) } // every stamp settled
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	require.True(t, trusted(g), "the snapshot of a settled checkout is trusted")
	require.NoError(t, g.EnsureCurrent())

	moved := strings.Repeat("7", 40)
	writeFile(t, filepath.Join(src, ".git", "refs", "heads", "main"), moved+"\n")
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, moved, se.Current)
	assert.Equal(t, UpdateUnverified, se.State)
}

// A server whose updater is not Hermes describes its own layout: its home
// variable, marker, recovery markers and receipt. The update states follow
// its files, and Hermes's files mean nothing to it.
func TestNonHermesLayout(t *testing.T) {
	tmp := tempDir(t)
	home := filepath.Join(tmp, "deploy-home")
	module, _ := agentRepo(t, filepath.Join(tmp, "plugin"))
	src := filepath.Dir(module)
	require.NoError(t, os.MkdirAll(home, 0o755))
	t.Setenv("PLUGINHOST_HOME", home)
	layout := Layout{
		HomeEnv:         "PLUGINHOST_HOME",
		Marker:          "run/deploy.pid",
		RecoveryMarkers: []string{".deploy-failed"},
		Receipt:         "run/last-deploy.json",
	}
	g, err := New(Options{ModulePath: module, Layout: layout})
	require.NoError(t, err)
	state := func() UpdateState {
		t.Helper()
		return g.Observe().State
	}

	assert.Equal(t, UpdateUnverified, state())
	o := g.Observe()
	assert.Equal(t, filepath.Join(home, "run", "deploy.pid"), o.MarkerPath)
	assert.Equal(t, filepath.Join(home, "run", "last-deploy.json"), o.ReceiptPath)

	// Hermes's files are not this updater's.
	gittest.WriteMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
	writeFile(t, filepath.Join(src, hermesIncomplete), "")
	assert.Equal(t, UpdateUnverified, state(), "Hermes's marker and recovery marker")

	gittest.WriteMarker(t, filepath.Join(home, "run", "deploy.pid"), os.Getpid(), time.Now())
	assert.Equal(t, UpdateActive, state())
	gittest.WriteMarker(t, filepath.Join(home, "run", "deploy.pid"), os.Getpid(), time.Now().Add(-time.Hour))
	assert.Equal(t, UpdateAbandoned, state())
	writeFile(t, filepath.Join(src, ".deploy-failed"), "")
	assert.Equal(t, UpdateIncomplete, state())

	commit(t, src, "run_agent.py", "moved\n")
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, UpdateIncomplete, se.State, "the stale payload carries this layout's state")

	writeFile(t, filepath.Join(home, "run", "last-deploy.json"), fmt.Sprintf(
		`{"schema":1,"update_id":"d1","outcome":"success","started_at":"2026-01-01T00:00:00Z","finished_at":"2026-01-01T00:01:00Z","post_update":{"sha":%q}}`,
		se.Current))
	o = g.Observe()
	require.NotNil(t, o.Receipt, "receipt problem: %s", o.ReceiptProblem)
	assert.Equal(t, "success", o.Receipt.Outcome)
	assert.Equal(t, se.Current, o.Receipt.To)
}

// A Layout that leads outside its home, or names a recovery marker with a
// path, is an error; the zero Layout is Hermes's.
func TestLayoutValidation(t *testing.T) {
	for _, l := range []Layout{
		{Marker: "../marker"},
		{Marker: "/abs/marker"},
		{Marker: "m", Receipt: "../../etc/receipt"},
		{Marker: "m", Lock: "/tmp/lock"},
		{Marker: "m", RecoveryMarkers: []string{"a/b"}},
		{Marker: "m", RecoveryMarkers: []string{""}},
		{HomeEnv: "X"},
	} {
		_, err := New(Options{Layout: l})
		assert.Error(t, err, "New with Layout %+v", l)
	}
	home := tempDir(t)
	g, err := New(Options{HomeDir: home})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(home, HermesLayout.Marker), g.Observe().MarkerPath)
	assert.Equal(t, filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)), g.Observe().ReceiptPath)
}

// The classes of error a host acts on are told apart with errors.Is.
func TestErrorClasses(t *testing.T) {
	t.Run("unsupported formats", func(t *testing.T) {
		for name, setup := range map[string]func(dir string){
			"ref storage elsewhere": func(dir string) {
				git(t, dir, "config", "core.repositoryformatversion", "1")
				git(t, dir, "config", "extensions.refStorage", "reftable://elsewhere")
			},
			"split index": func(dir string) { git(t, dir, "update-index", "--split-index") },
			"unknown extension": func(dir string) {
				git(t, dir, "config", "core.repositoryformatversion", "1")
				git(t, dir, "config", "extensions.someFutureThing", "true")
			},
		} {
			dir := tempDir(t)
			module, _ := agentRepo(t, dir)
			setup(dir)
			_, err := New(Options{ModulePath: module, HomeDir: dir})
			assert.ErrorIs(t, err, errors.ErrUnsupported, name)
		}
	})
	t.Run("no module", func(t *testing.T) {
		dir := tempDir(t)
		for _, p := range []string{filepath.Join(dir, "missing.py"), filepath.Join(dir, "no", "such", "dir", "m.py"), dir} {
			_, err := New(Options{ModulePath: p, HomeDir: dir})
			assert.ErrorIs(t, err, ErrNoModule, "New(%q)", p)
			assert.Equal(t, 1, strings.Count(err.Error(), p), "the message names the path once: %v", err)
		}
	})
	t.Run("expected revision outside Git", func(t *testing.T) {
		dir := tempDir(t)
		module := filepath.Join(dir, "run_agent.py")
		writeFile(t, module, "x\n")
		_, err := New(Options{ModulePath: module, HomeDir: dir, ExpectRevision: strings.Repeat("a", 40)})
		assert.ErrorIs(t, err, ErrNotCheckout)
		assert.ErrorContains(t, err, "no Git worktree holds", "it says why")
	})
	t.Run("stale", func(t *testing.T) {
		c := newChangedCheckout(t)
		err := c.guard.EnsureCurrent()
		assert.ErrorIs(t, err, ErrStale)
		assert.NotErrorIs(t, err, ErrReadTimeout)
	})
}

// Options are resolved once, at New: a relative HomeDir or Python is made
// absolute then, so that a later chdir of the host's moves nothing; a
// change to HermesLayout does not change what the zero Layout means.
func TestOptionsResolvedOnce(t *testing.T) {
	tmp := tempDir(t)
	gittest.WriteMarker(t, filepath.Join(tmp, "home", hermesMarker), os.Getpid(), time.Now())
	t.Chdir(tmp)
	g, err := New(Options{HomeDir: "home", Python: filepath.Join("install", "venv", "bin", "python")})
	require.NoError(t, err)
	t.Chdir(os.TempDir())
	o := g.Observe()
	assert.Equal(t, filepath.Join(tmp, "home", hermesMarker), o.MarkerPath)
	assert.Equal(t, MarkerActive, o.Marker)
	assert.Equal(t, []string{filepath.Join(tmp, "install")}, o.InstallRoots)

	saved := HermesLayout
	t.Cleanup(func() { HermesLayout = saved })
	HermesLayout.Marker = "changed"
	g, err = New(Options{HomeDir: tmp})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(tmp, hermesMarker), g.Observe().MarkerPath)
}

// An expected revision of the wrong length for the repository's object
// format is an error at New, not a guard that is stale forever.
func TestExpectRevisionOfAnotherFormat(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	_, err := New(Options{ModulePath: module, HomeDir: dir, ExpectRevision: strings.Repeat("a", 64)})
	assert.ErrorContains(t, err, "64 hex digits")
	var oe *OptionError
	require.ErrorAs(t, err, &oe, "the option's fault, found at binding")
	assert.Equal(t, "Options.ExpectRevision", oe.Field)
	assert.Equal(t, strings.Repeat("a", 64), oe.Value)
}

// No stale message may contain "success", inside a word too: a client
// that searches the message for it must not find it, and the error says
// so rather than speak of a word the value does not hold.
func TestDocMessageRefusesSuccessInsideAWord(t *testing.T) {
	for _, field := range []string{"Options.Message", "Options.ReloadMessage", "Options.AgentName", "Options.ServerName"} {
		for _, value := range []string{"Update unsuccessful", "SUCCESSFUL", "success"} {
			var opts Options
			switch field {
			case "Options.Message":
				opts.Message = value
			case "Options.ReloadMessage":
				opts.ReloadMessage = value
			case "Options.AgentName":
				opts.AgentName = value
			case "Options.ServerName":
				opts.ServerName = value
			}
			_, err := New(opts)
			var oe *OptionError
			require.ErrorAs(t, err, &oe, "%s %q", field, value)
			assert.Equal(t, field, oe.Field)
			assert.Contains(t, oe.Reason, `contains "success"`, "%s %q", field, value)
			assert.NotContains(t, oe.Reason, "the word", "%s %q: the value need not hold the word", field, value)
		}
	}
	_, err := New(Options{Message: "Update done: restart by hand."})
	assert.NoError(t, err)
}

// Watch refuses an interval that is not positive whatever path the guard
// takes, the watch path too: the path may change while Watch runs.
func TestWatchRejectsIntervalZeroOnEitherPath(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	for _, noWatch := range []bool{false, true} {
		g, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Check: map[bool]string{true: "stat"}[noWatch]})
		require.NoError(t, err)
		require.NoError(t, g.EnsureCurrent())
		for _, interval := range []time.Duration{0, -time.Second} {
			err := g.Watch(context.Background(), interval)
			assert.ErrorContains(t, err, "not positive", "check path %s, interval %v", g.Observe().Check, interval)
		}
		require.NoError(t, g.Close())
	}
}

// Watch fires Changed without a request.
func TestWatchFiresChanged(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g, err := New(Options{ModulePath: module, HomeDir: dir})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Watch(ctx, 10*time.Millisecond) }()
	commit(t, dir, "run_agent.py", "moved\n")
	select {
	case <-g.Changed():
	case <-time.After(30 * time.Second):
		t.Fatal("Changed did not fire while Watch ran")
	}
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	assert.Error(t, g.Watch(context.Background(), 0))
}

// Changed, asked before the guard is bound, fires for the binding Capture
// then makes.
func TestChangedBeforeCapture(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g, err := New(Options{HomeDir: dir})
	require.NoError(t, err)
	changed := g.Changed()
	require.NoError(t, g.Capture(module))
	commit(t, dir, "run_agent.py", "moved\n")
	require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
	select {
	case <-changed:
	default:
		t.Fatal("the channel from before Capture did not fire")
	}
	var r *Plan
	assert.ErrorContains(t, r.Bind(context.Background()), "not made by Guard.PlanReload")
	assert.ErrorContains(t, new(Plan).Bind(context.Background()), "not made by Guard.PlanReload")
}

// On the watch path, Watch waits on inotify events: with an interval of an
// hour, a commit still fires Changed at once.
func TestWatchIsEventDriven(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir}, testEnv(nil))
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	if g.Observe().Check != "watch" {
		t.Skipf("not on the watch path here: %s", g.Observe().CheckReason)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Watch(ctx, time.Hour) }()
	commit(t, dir, "run_agent.py", "moved\n")
	select {
	case <-g.Changed():
	case <-time.After(30 * time.Second):
		t.Fatal("Changed did not fire: Watch polls instead of waiting on events")
	}
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}

// A stale guard's Watch rests: a Debug logger writing into a directory the
// guard watches (an ancestor of the checkout) does not make it check, log
// and wake again without end.
func TestWatchRestsOnceStale(t *testing.T) {
	tmp := tempDir(t)
	dir := filepath.Join(tmp, "agent")
	module, _ := agentRepo(t, dir)
	logFile, err := os.Create(filepath.Join(tmp, "server.log"))
	require.NoError(t, err)
	defer logFile.Close()
	h := &recordHandler{}
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(logFile, countingWriter{h}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, err := newGuard(Options{ModulePath: module, HomeDir: tmp, Logger: logger}, testEnv(nil))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Watch(ctx, 10*time.Millisecond) }()
	commit(t, dir, "run_agent.py", "moved\n")
	<-g.Changed()
	before := h.count()
	for i := 0; i < 50; i++ { // writes beside the checkout, as a log does
		_, err := logFile.WriteString("unrelated\n")
		require.NoError(t, err)
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	assert.LessOrEqual(t, h.count()-before, 2, "log lines after the guard went stale")
}

// A closed guard: Close again is nil, and a check still answers, on the
// stat path, for the checkout as it is.
func TestCloseTwiceThenCheck(t *testing.T) {
	c := newReloadCase(t)
	require.NoError(t, c.g.Close())
	require.NoError(t, c.g.Close())
	assert.ErrorIs(t, c.g.EnsureCurrent(), ErrStale)
	assert.NotEqual(t, "watch", c.g.Observe().Check)
}
