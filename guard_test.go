package runtimeguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			writeMarker(t, marker(c), os.Getpid(), time.Now())
			require.NoError(t, os.Remove(marker(c))) // the updater removes it when it fails
		}, UpdateUnverified},
		{"interrupted-exit", func(t *testing.T, c *changedCheckout) {
			writeMarker(t, marker(c), os.Getpid(), time.Now().Add(-time.Minute))
			require.NoError(t, os.Remove(marker(c)))
		}, UpdateUnverified},
		{"active", func(t *testing.T, c *changedCheckout) {
			writeMarker(t, marker(c), os.Getpid(), time.Now())
		}, UpdateActive},
		{"dead", func(t *testing.T, c *changedCheckout) {
			writeMarker(t, marker(c), gittest.ExitedPID(t, processGone), time.Now())
		}, UpdateAbandoned},
		{"over-age", func(t *testing.T, c *changedCheckout) {
			writeMarker(t, marker(c), os.Getpid(), time.Now().Add(-24*time.Hour))
		}, UpdateAbandoned},
		{"malformed", func(t *testing.T, c *changedCheckout) {
			writeFile(t, marker(c), "not-a-pid\nnot-a-time\n")
		}, UpdateUnknown},
		{"invalid-encoding", func(t *testing.T, c *changedCheckout) {
			writeFile(t, marker(c), "\xff\xfe")
		}, UpdateUnknown},
		{"future", func(t *testing.T, c *changedCheckout) {
			writeMarker(t, marker(c), os.Getpid(), time.Now().Add(24*time.Hour))
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
			writeMarker(t, marker, os.Getpid(), time.Now())
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
	writeMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
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
	writeMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
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

func TestObserveReportsWhatItRead(t *testing.T) {
	tmp := tempDir(t)
	home, venv := filepath.Join(tmp, "home"), filepath.Join(tmp, "install")
	module, _ := agentRepo(t, filepath.Join(tmp, "agent"))
	require.NoError(t, os.MkdirAll(home, 0o755))
	g, err := New(Options{ModulePath: module, HomeDir: home, Python: filepath.Join(venv, ".venv", "bin", "python")})
	require.NoError(t, err)
	writeFile(t, filepath.Join(venv, hermesIncomplete), "")
	writeMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())

	o := g.Observe()
	assert.Equal(t, filepath.Join(home, hermesMarker), o.MarkerPath)
	assert.Equal(t, MarkerActive, o.Marker)
	assert.Equal(t, []string{resolved(t, filepath.Join(tmp, "agent")), venv}, o.InstallRoots)
	assert.Equal(t, []string{filepath.Join(venv, hermesIncomplete)}, o.RecoveryMarkers)
	assert.Equal(t, UpdateIncomplete, o.State)
	assert.Equal(t, o.State, g.Observe().State)
}

// Observe without a guard reports the updater's files when New cannot
// bind, also for a module path that leads nowhere.
func TestObserveWithoutAGuard(t *testing.T) {
	tmp := tempDir(t)
	home := filepath.Join(tmp, "home")
	require.NoError(t, os.MkdirAll(home, 0o755))
	writeMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
	for _, module := range []string{filepath.Join(tmp, "nope", "run_agent.py"), filepath.Join(tmp, "run_agent.py")} {
		opts := Options{ModulePath: module, HomeDir: home}
		_, err := New(opts)
		require.ErrorIs(t, err, ErrNoModule)
		o, err := Observe(opts)
		require.NoError(t, err, module)
		assert.Equal(t, filepath.Join(home, hermesMarker), o.MarkerPath)
		assert.Equal(t, MarkerActive, o.Marker)
		assert.Equal(t, UpdateActive, o.State)
	}
	_, err := Observe(Options{ModulePath: filepath.Join(tmp, "m.py"), HomeDir: home, Layout: Layout{HomeEnv: "X"}})
	assert.Error(t, err, "a layout with no marker describes no install")
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

func TestMiddlewareNegotiatesProblemDetails(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	for _, problem := range []bool{false, true} {
		g, err := New(Options{ModulePath: module, HomeDir: dir, ProblemDetails: problem})
		require.NoError(t, err)
		calls := 0
		h := g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls++ }))
		serve := func(accept string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/api/chat/start", nil)
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			h.ServeHTTP(rec, req)
			return rec
		}
		assert.Equal(t, 200, serve("").Code)
		require.Equal(t, 1, calls)
		commit(t, dir, "run_agent.py", fmt.Sprintf("x = %v\n", problem))

		rec := serve("application/problem+json")
		assert.Equal(t, 409, rec.Code)
		var body map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		if problem {
			assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
			assert.Equal(t, ProblemType, body["type"])
			assert.Equal(t, float64(409), body["status"])
			assert.Equal(t, PayloadType, body["stale_type"])
			assert.Equal(t, true, body["retryable"])
			assert.Equal(t, false, body["restart_scheduled"])
		} else {
			assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			assert.Equal(t, PayloadType, body["type"])
		}
		// The body depends on Accept exactly where it is negotiated.
		if problem {
			assert.Equal(t, "Accept", rec.Header().Get("Vary"))
		} else {
			assert.Empty(t, rec.Header().Values("Vary"))
		}
		rec = serve("application/json")
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"), "the legacy body stays the default")
		assert.Equal(t, 1, calls, "a stale runtime reached the handler")
	}
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
