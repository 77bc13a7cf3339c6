package runtimeguard

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// The update state is what the marker and the recovery markers add up to,
// read from real files through Observe: an unknown marker is unknown
// whatever else is there, a recovery marker makes any other state
// incomplete, and no marker is unverified.
func TestUpdateStateTable(t *testing.T) {
	for _, tc := range []struct {
		marker     MarkerState
		incomplete bool
		want       UpdateState
	}{
		{MarkerAbsent, false, UpdateUnverified},
		{MarkerActive, false, UpdateActive},
		{MarkerAbandoned, false, UpdateAbandoned},
		{MarkerUnknown, false, UpdateUnknown},
		{MarkerAbsent, true, UpdateIncomplete},
		{MarkerActive, true, UpdateIncomplete},
		{MarkerAbandoned, true, UpdateIncomplete},
		{MarkerUnknown, true, UpdateUnknown},
	} {
		t.Run(string(tc.marker)+map[bool]string{true: "+incomplete"}[tc.incomplete], func(t *testing.T) {
			tmp := tempDir(t)
			home := filepath.Join(tmp, "home")
			require.NoError(t, os.MkdirAll(home, 0o755))
			module, _ := agentRepo(t, filepath.Join(tmp, "agent"))
			g, err := New(Options{ModulePath: module, HomeDir: home})
			require.NoError(t, err)
			defer g.Close()
			marker := filepath.Join(home, hermesMarker)
			switch tc.marker {
			case MarkerActive:
				gittest.WriteMarker(t, marker, os.Getpid(), time.Now())
			case MarkerAbandoned:
				gittest.WriteMarker(t, marker, os.Getpid(), time.Now().Add(-time.Hour))
			case MarkerUnknown:
				writeFile(t, marker, "garbage")
			}
			if tc.incomplete {
				writeFile(t, filepath.Join(filepath.Dir(module), hermesIncomplete), "")
			}
			o := g.Observe()
			assert.Equal(t, tc.marker, o.Marker, "Observe().Marker (%s)", o.MarkerReason)
			assert.Equal(t, tc.want, o.State, "Observe().State with marker %s, incomplete %v", tc.marker, tc.incomplete)
		})
	}
}

// symlinkOrSkip makes a symbolic link, or skips the test where none can be made
// (Windows without the privilege, Wine).
func symlinkOrSkip(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symbolic link here: %v", err)
	}
}

// A guard whose home is a profile home however it is spelt (a link to it,
// a path through "..", a trailing slash) reads the root's marker: with a
// live updater named there and a success receipt in the profile, no
// reload is proven.
// An install root that cannot be searched for recovery markers (here a
// file, where the interpreter's venv would be) makes the update state
// unknown, whether the guard is bound or not, and stops a reload a
// receipt would prove; the observation and the plan's refusal say which
// root and why.
func TestRecoveryMarkersThatCannotBeLookedFor(t *testing.T) {
	tmp := tempDir(t)
	home := filepath.Join(tmp, "home")
	module, loaded := agentRepo(t, filepath.Join(home, "hermes-agent"))
	root := filepath.Join(tmp, "install")
	writeFile(t, root, "a file where the install root would be")
	opts := Options{ModulePath: module, HomeDir: home, Python: filepath.Join(root, "venv", "bin", "python")}
	g, err := New(opts)
	require.NoError(t, err)
	defer g.Close()
	unbound, err := Observe(opts)
	require.NoError(t, err)
	for name, o := range map[string]Observation{"Guard.Observe": g.Observe(), "Observe": unbound} {
		assert.Equal(t, UpdateUnknown, o.State, "%s().State", name)
		assert.Empty(t, o.RecoveryMarkers, "%s().RecoveryMarkers", name)
		assert.Contains(t, o.RecoveryProblem, root, "%s().RecoveryProblem names the root", name)
		assert.Contains(t, o.RecoveryProblem, "not a directory", "%s().RecoveryProblem says why", name)
	}

	moved := commit(t, filepath.Dir(module), "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", loaded, moved, time.Now()))
	_, err = g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	assert.ErrorContains(t, err, root)
	assert.ErrorContains(t, err, "not a directory")

	// Once it can be searched, nothing is left to say, and the receipt
	// proves the reload.
	require.NoError(t, os.Remove(root))
	assert.Empty(t, g.Observe().RecoveryProblem)
	p, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	p.Release()
}

func TestProfileHomeBehindALink(t *testing.T) {
	live := gittest.LongChild(t).Process.Pid
	spellings := map[string]func(root, tmp string) string{
		"a link": func(root, tmp string) string {
			link := filepath.Join(tmp, ".hermes-work")
			symlinkOrSkip(t, filepath.Join(root, "profiles", "work"), link)
			return link
		},
		"a link to a link": func(root, tmp string) string {
			symlinkOrSkip(t, filepath.Join(root, "profiles"), filepath.Join(tmp, "p"))
			link := filepath.Join(tmp, ".hermes-work")
			symlinkOrSkip(t, filepath.Join(tmp, "p", "work"), link)
			return link
		},
		"dot-dot":          func(root, _ string) string { return filepath.Join(root, "profiles", "other") + "/../work" },
		"a trailing slash": func(root, _ string) string { return filepath.Join(root, "profiles", "work") + "/" },
	}
	for name, spell := range spellings {
		t.Run(name, func(t *testing.T) {
			tmp := tempDir(t)
			root := filepath.Join(tmp, "root")
			profile := filepath.Join(root, "profiles", "work")
			require.NoError(t, os.MkdirAll(profile, 0o755))
			require.NoError(t, os.MkdirAll(filepath.Join(root, "profiles", "other"), 0o755))
			dir := filepath.Join(root, "hermes-agent") // where Hermes installs it
			module, _ := agentRepo(t, dir)
			g, err := New(Options{ModulePath: module, HomeDir: spell(root, tmp)})
			require.NoError(t, err)
			moved := commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n")
			writeFile(t, filepath.Join(receiptsDir(profile), "latest.json"), string(gittest.HermesReceipt(t, "gen2-no-id-success.json", moved, time.Now())))
			writeFile(t, filepath.Join(root, hermesMarker), fmt.Sprintf("%d\n%d\n", live, time.Now().Unix()))

			_, err = g.PlanReload(context.Background())
			require.ErrorIs(t, err, ErrNotReady)
			assert.ErrorContains(t, err, filepath.Join(root, hermesMarker))
			o := g.Observe()
			assert.Equal(t, UpdateActive, o.State, "%s: %s", o.MarkerPath, o.MarkerReason)

			require.NoError(t, os.Remove(filepath.Join(root, hermesMarker)))
			r, err := g.PlanReload(context.Background())
			require.NoError(t, err, "the marker gone, the profile's receipt proves")
			r.Release()
		})
	}
}

func TestObserveReportsWhatItRead(t *testing.T) {
	tmp := tempDir(t)
	home, venv := filepath.Join(tmp, "home"), filepath.Join(tmp, "install")
	module, _ := agentRepo(t, filepath.Join(tmp, "agent"))
	require.NoError(t, os.MkdirAll(home, 0o755))
	g, err := New(Options{ModulePath: module, HomeDir: home, Python: filepath.Join(venv, ".venv", "bin", "python")})
	require.NoError(t, err)
	writeFile(t, filepath.Join(venv, hermesIncomplete), "")
	gittest.WriteMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())

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
	gittest.WriteMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
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
