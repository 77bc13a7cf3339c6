package runtimeguard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	writeMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
	writeFile(t, filepath.Join(src, hermesIncomplete), "")
	assert.Equal(t, UpdateUnverified, state(), "Hermes's marker and recovery marker")

	writeMarker(t, filepath.Join(home, "run", "deploy.pid"), os.Getpid(), time.Now())
	assert.Equal(t, UpdateActive, state())
	writeMarker(t, filepath.Join(home, "run", "deploy.pid"), os.Getpid(), time.Now().Add(-time.Hour))
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

// The problem document's type URI is the URL of a file of this repository
// on its main branch: the file exists, and it defines the payload (the
// type's own URL and the payload's type word are in it).
func TestProblemTypeResolvesToAFile(t *testing.T) {
	path, ok := strings.CutPrefix(ProblemType, "https://github.com/runtimeguard/runtimeguard/blob/main/")
	require.True(t, ok, "ProblemType %q is not the URL of a file of the repository", ProblemType)
	require.NotContains(t, path, "#", "ProblemType %q depends on an anchor", ProblemType)
	require.True(t, filepath.IsLocal(filepath.FromSlash(path)), "ProblemType %q leaves the repository", ProblemType)
	body, err := os.ReadFile(filepath.FromSlash(path))
	require.NoError(t, err, "ProblemType %q names no file of the repository", ProblemType)
	assert.Contains(t, string(body), ProblemType)
	assert.Contains(t, string(body), PayloadType)
	for _, key := range []string{`"error"`, `"type"`, `"retryable"`, `"restart_scheduled"`, `"agent_update_state"`} {
		assert.Contains(t, string(body), key)
	}
}

// Options are resolved once, at New: a relative HomeDir or Python is made
// absolute then, so that a later chdir of the host's moves nothing; a
// change to HermesLayout does not change what the zero Layout means.
func TestOptionsResolvedOnce(t *testing.T) {
	tmp := tempDir(t)
	writeMarker(t, filepath.Join(tmp, "home", hermesMarker), os.Getpid(), time.Now())
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
