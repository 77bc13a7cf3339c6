package runtimeguard

import (
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// Installs without Git: a module that no Git checkout identifies is
// guarded by its path with links resolved, the module file itself, and
// the build its install's stamp names.

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

// The directory of the stamp is the one the layout's StampDirEnv names
// where it is set: Hermes's HERMES_INSTALL_ROOT, which its Nix wrapper and
// desktop app set.
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
	layout.Stamp, layout.StampDirEnv = "", ""
	g3, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Layout: layout})
	require.NoError(t, err)
	defer g3.Close()
	assert.Empty(t, g3.Identity().Revision)
	assert.Equal(t, "file", g3.Observe().IdentifiedBy)
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
		{"a stamp directory without a stamp", func(l *Layout) { l.Stamp = "" }, "Layout.StampDirEnv"},
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
