package runtimeguard

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	writeMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
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
