//go:build unix

package runtimeguard

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// deploy is a release layout as deploy tools make it: three checkouts of
// one history side by side, links that select one, and a module file
// linked from an application directory.
//
//	releases/v1      the checkout the server loaded (module in pkg/)
//	releases/v1b     a clone of v1 at the same revision
//	releases/v2      a clone of v1 one commit ahead
//	current       -> releases/v1
//	app/run_agent.py -> ../releases/v1/pkg/run_agent.py
type deploy struct {
	root, v1, v1b, v2 string
	first, rev, rev2  string // v1's first commit, its HEAD, v2's HEAD
}

func newDeploy(t *testing.T) *deploy {
	t.Helper()
	tmpl := deployTemplate(t)
	d := &deploy{root: tempDir(t), first: tmpl.first, rev: tmpl.rev, rev2: tmpl.rev2}
	// A copy of the template: the same histories, made with one process
	// instead of a dozen git commands per case.
	if out, err := exec.Command("cp", "-a", tmpl.root+"/.", d.root).CombinedOutput(); err != nil {
		t.Fatalf("copying the deploy template: %v: %s", err, out)
	}
	d.v1 = filepath.Join(d.root, "releases", "v1")
	d.v1b = filepath.Join(d.root, "releases", "v1b")
	d.v2 = filepath.Join(d.root, "releases", "v2")
	return d
}

var (
	deployOnce sync.Once
	deployTmpl *deploy
	deployErr  string
)

// deployTemplate makes the deploy layout once per run, in a directory
// TestMain removes; newDeploy copies it.
func deployTemplate(t *testing.T) *deploy {
	t.Helper()
	deployOnce.Do(func() {
		root, err := os.MkdirTemp("", "runtimeguard-deploy-")
		if err != nil {
			deployErr = err.Error()
			return
		}
		cleanups = append(cleanups, root)
		// The template is made by a test of its own so that a failure
		// is reported once, with git's output, and fails every case.
		ok := t.Run("deploy template", func(t *testing.T) {
			d := &deploy{root: root}
			d.v1 = filepath.Join(root, "releases", "v1")
			d.v1b = filepath.Join(root, "releases", "v1b")
			d.v2 = filepath.Join(root, "releases", "v2")
			d.first = initRepo(t, d.v1, map[string]string{"pkg/run_agent.py": "x = 1\n", "lib.py": "y\n"})
			d.rev = commit(t, d.v1, "lib.py", "y = 2\n")
			git(t, root, "clone", "-q", d.v1, d.v1b)
			git(t, root, "clone", "-q", d.v1, d.v2)
			d.rev2 = commit(t, d.v2, "pkg/run_agent.py", "x = 2\n")
			symlink(t, filepath.Join("releases", "v1"), filepath.Join(root, "current"))
			require.NoError(t, os.MkdirAll(filepath.Join(root, "app"), 0o755))
			symlink(t, filepath.Join("..", "releases", "v1", "pkg", "run_agent.py"), filepath.Join(root, "app", "run_agent.py"))
			deployTmpl = d
		})
		if !ok {
			deployErr = "the deploy template could not be made"
		}
	})
	if deployTmpl == nil {
		t.Fatal(deployErr)
	}
	return deployTmpl
}

// symlink makes a link at path whose text is target.
func symlink(t *testing.T, target, path string) {
	t.Helper()
	require.NoError(t, os.Symlink(target, path))
}

// repoint replaces the link at path atomically, as deploy tools do: a new
// link beside it, renamed over it.
func repoint(t *testing.T, target, path string) {
	t.Helper()
	tmp := path + ".new"
	symlink(t, target, tmp)
	require.NoError(t, os.Rename(tmp, path))
}

// swapDirs exchanges two directories with renames.
func swapDirs(t *testing.T, a, b string) {
	t.Helper()
	require.NoError(t, os.Rename(a, a+".swap"))
	require.NoError(t, os.Rename(b, a))
	require.NoError(t, os.Rename(a+".swap", b))
}

// gitVerdict is what git itself says of a configured module path: the
// revision of HEAD and whether the index tracks the module, both asked in
// the directory the module file is in once links are followed. ok is false
// when git cannot answer (no repository, an unreadable HEAD, a path that
// leads nowhere), or takes over ten seconds.
func gitVerdict(t *testing.T, configured string) (dir, rev string, tracked, ok bool) {
	t.Helper()
	module, err := filepath.EvalSymlinks(configured)
	if err != nil {
		// A deleted module file still names its place; anything else
		// that leads nowhere has no answer.
		fi, lerr := os.Lstat(configured)
		d, derr := filepath.EvalSymlinks(filepath.Dir(configured))
		if derr != nil || lerr == nil && fi.Mode()&os.ModeSymlink != 0 || !os.IsNotExist(lerr) {
			return "", "", false, false
		}
		module = filepath.Join(d, filepath.Base(configured))
	}
	dir = filepath.Dir(module)
	run := func(args ...string) (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = dir, gittest.Env
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	rev, ok = run("rev-parse", "--verify", "-q", "HEAD")
	if !ok {
		return dir, "", false, false
	}
	_, tracked = run("ls-files", "--error-unmatch", "--", filepath.Base(module))
	return dir, rev, tracked, true
}

// The sweep: bind, change the checkout or what the configured path leads
// to, and compare the guard with git right after the change and again on
// the next check, on the fast path (a settled clock), with the real clock,
// and with Options.Check "read". The guard may answer "current" only where git agrees
// that the module the path leads to is the bound one, at the bound revision,
// and tracked; "stale" where git agrees is allowed only for the cases
// marked failClosed, and each case says which answer it wants.
func TestSweepAgainstGit(t *testing.T) {
	type target int
	const (
		direct     target = iota // releases/v1/pkg/run_agent.py
		viaCurrent               // current/pkg/run_agent.py
		viaApp                   // app/run_agent.py
	)
	cases := []struct {
		name       string
		path       target
		change     func(t *testing.T, d *deploy)
		stale      bool
		failClosed bool // stale although git sees the same revision: the path leads elsewhere, or another supported git fails
	}{
		// Git operations.
		{"commit", direct, func(t *testing.T, d *deploy) { commit(t, d.v1, "pkg/run_agent.py", "x = 3\n") }, true, false},
		{"commit --amend", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "commit", "-q", "--amend", "-m", "amended") }, true, false},
		{"reset --hard", viaCurrent, func(t *testing.T, d *deploy) { git(t, d.v1, "reset", "-q", "--hard", d.first) }, true, false},
		{"checkout of another branch at another commit", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "checkout", "-q", "-b", "older", d.first)
		}, true, false},
		{"checkout of another branch at the same commit", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "checkout", "-q", "-b", "same")
		}, false, false},
		{"detach at the same commit", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "checkout", "-q", "--detach") }, false, false},
		{"gc", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "gc", "-q", "--prune=now") }, false, false},
		{"pack-refs --all", viaApp, func(t *testing.T, d *deploy) { git(t, d.v1, "pack-refs", "--all") }, false, false},
		{"branch renamed", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "branch", "-m", "main", "trunk") }, false, false},
		{"other refs created", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "branch", "topic", d.first)
			git(t, d.v1, "tag", "v1")
		}, false, false},
		{"fetch", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "fetch", "-q", d.v2, "main:refs/remotes/v2/main") }, false, false},
		{"pull --ff-only", viaCurrent, func(t *testing.T, d *deploy) { git(t, d.v1, "pull", "-q", "--ff-only", d.v2, "main") }, true, false},
		{"rm --cached of the module", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "rm", "-q", "--cached", "pkg/run_agent.py")
		}, true, false},
		{"module file deleted", direct, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Remove(filepath.Join(d.v1, "pkg", "run_agent.py")))
		}, false, false},
		{"config rewritten", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "config", "branch.main.remote", "origin") }, false, false},

		// Links re-pointed, deleted, re-made.
		{"current flipped to another revision", viaCurrent, func(t *testing.T, d *deploy) {
			repoint(t, filepath.Join("releases", "v2"), filepath.Join(d.root, "current"))
		}, true, false},
		{"current flipped to a clone at the same revision", viaCurrent, func(t *testing.T, d *deploy) {
			repoint(t, filepath.Join("releases", "v1b"), filepath.Join(d.root, "current"))
		}, true, true},
		{"current re-made to the same place", viaCurrent, func(t *testing.T, d *deploy) {
			repoint(t, filepath.Join("releases", "v1"), filepath.Join(d.root, "current"))
		}, false, false},
		{"current deleted", viaCurrent, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Remove(filepath.Join(d.root, "current")))
		}, true, false},
		{"current replaced by a directory of another revision", viaCurrent, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Remove(filepath.Join(d.root, "current")))
			require.NoError(t, os.Rename(d.v2, filepath.Join(d.root, "current")))
		}, true, false},
		{"module link flipped to another revision", viaApp, func(t *testing.T, d *deploy) {
			repoint(t, filepath.Join(d.v2, "pkg", "run_agent.py"), filepath.Join(d.root, "app", "run_agent.py"))
		}, true, false},
		{"module link flipped to a clone at the same revision", viaApp, func(t *testing.T, d *deploy) {
			repoint(t, filepath.Join(d.v1b, "pkg", "run_agent.py"), filepath.Join(d.root, "app", "run_agent.py"))
		}, true, true},
		{"module link deleted", viaApp, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Remove(filepath.Join(d.root, "app", "run_agent.py")))
		}, true, false},
		{"module link replaced by a regular file", viaApp, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Remove(filepath.Join(d.root, "app", "run_agent.py")))
			writeFile(t, filepath.Join(d.root, "app", "run_agent.py"), "x = 1\n")
		}, true, false},
		{"app directory replaced by a link to another revision", viaApp, func(t *testing.T, d *deploy) {
			app := filepath.Join(d.root, "app")
			require.NoError(t, os.Rename(app, app+".old"))
			symlink(t, filepath.Join(d.v2, "pkg"), app)
		}, true, false},

		// Directories between the worktree's top level and the module.
		{"pkg replaced by a link into another revision", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.Rename(pkg, pkg+".old"))
			symlink(t, filepath.Join(d.v2, "pkg"), pkg)
		}, true, false},
		{"pkg replaced by a link into a clone at the same revision", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.Rename(pkg, pkg+".old"))
			symlink(t, filepath.Join(d.v1b, "pkg"), pkg)
		}, true, true},
		{"pkg replaced by a copy of itself", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.Rename(pkg, pkg+".old"))
			writeFile(t, filepath.Join(pkg, "run_agent.py"), "x = 1\n")
		}, false, false},
		{"pkg removed", direct, func(t *testing.T, d *deploy) {
			require.NoError(t, os.RemoveAll(filepath.Join(d.v1, "pkg")))
		}, true, false},
		{"release directories swapped under current", viaCurrent, func(t *testing.T, d *deploy) {
			swapDirs(t, d.v1, d.v2)
		}, true, false},
		{"release directory swapped with a clone at the same revision", direct, func(t *testing.T, d *deploy) {
			swapDirs(t, d.v1, d.v1b)
		}, false, false},
		{"releases directory replaced by a link", viaCurrent, func(t *testing.T, d *deploy) {
			releases := filepath.Join(d.root, "releases")
			require.NoError(t, os.Rename(releases, releases+".old"))
			require.NoError(t, os.MkdirAll(releases+".new", 0o755))
			require.NoError(t, os.Rename(filepath.Join(releases+".old", "v2"), filepath.Join(releases+".new", "v1")))
			symlink(t, releases+".new", releases)
		}, true, false},

		// Special files where Git keeps its own: git before 2.54 passes
		// them over, later versions die ("not a regular file", "error
		// reading"), so no answer is current.
		{"a FIFO named .git in pkg", direct, func(t *testing.T, d *deploy) {
			mkfifo(t, filepath.Join(d.v1, "pkg", ".git"))
		}, true, true},
		{"a socket named .git in pkg", direct, func(t *testing.T, d *deploy) {
			mksocket(t, filepath.Join(d.v1, "pkg", ".git"))
		}, true, true},
		{"a link to /dev/null named .git in pkg", direct, func(t *testing.T, d *deploy) {
			symlink(t, os.DevNull, filepath.Join(d.v1, "pkg", ".git"))
		}, true, true},
		{"a link loop named .git in pkg", direct, func(t *testing.T, d *deploy) {
			symlink(t, ".git", filepath.Join(d.v1, "pkg", ".git"))
		}, true, true},
		{"a dangling link named .git in pkg", direct, func(t *testing.T, d *deploy) {
			symlink(t, "nowhere", filepath.Join(d.v1, "pkg", ".git"))
		}, false, false},

		// What makes a directory a Git directory to git: a valid HEAD,
		// objects and refs that pass access(2) for X_OK. A Git directory
		// that stops being one is passed over; a directory on the way to
		// the module that becomes one is a bare repository to git.
		{".git/objects moved away", direct, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Rename(filepath.Join(d.v1, ".git", "objects"), filepath.Join(d.root, "objects.moved")))
		}, true, false},
		{".git/refs moved away", direct, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Rename(filepath.Join(d.v1, ".git", "refs"), filepath.Join(d.root, "refs.moved")))
		}, true, false},
		{".git/objects a file without execute permission", direct, func(t *testing.T, d *deploy) {
			objects := filepath.Join(d.v1, ".git", "objects")
			require.NoError(t, os.Rename(objects, filepath.Join(d.root, "objects.moved")))
			require.NoError(t, os.WriteFile(objects, nil, 0o644))
		}, true, false},
		{".git/objects an executable file", direct, func(t *testing.T, d *deploy) {
			objects := filepath.Join(d.v1, ".git", "objects")
			require.NoError(t, os.Rename(objects, filepath.Join(d.root, "objects.moved")))
			require.NoError(t, os.WriteFile(objects, nil, 0o755))
		}, false, false},
		{".git/refs a link to a directory", direct, func(t *testing.T, d *deploy) {
			refs := filepath.Join(d.v1, ".git", "refs")
			require.NoError(t, os.Rename(refs, filepath.Join(d.root, "refs.moved")))
			symlink(t, filepath.Join(d.root, "refs.moved"), refs)
		}, false, false},
		{"pkg made a bare repository", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "HEAD"), []byte(d.first+"\n"), 0o644))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "objects"), 0o755))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "refs"), 0o755))
		}, true, false},
		{"pkg holds HEAD, objects and refs, HEAD not valid", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "HEAD"), []byte("not a ref\n"), 0o644))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "objects"), 0o755))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "refs"), 0o755))
		}, false, false},
		{"pkg made a bare repository with executable files", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "objects"), nil, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "refs"), nil, 0o755))
		}, true, false},
		{"refs/heads a file, the branch packed", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "pack-refs", "--all")
			heads := filepath.Join(d.v1, ".git", "refs", "heads")
			require.NoError(t, os.RemoveAll(heads))
			require.NoError(t, os.WriteFile(heads, nil, 0o644))
		}, true, false},
		{"refs an executable file, the branch packed", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "pack-refs", "--all")
			refs := filepath.Join(d.v1, ".git", "refs")
			require.NoError(t, os.RemoveAll(refs))
			require.NoError(t, os.WriteFile(refs, nil, 0o755))
		}, true, false},
		{"refs/heads removed, the branch packed", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "pack-refs", "--all")
			require.NoError(t, os.RemoveAll(filepath.Join(d.v1, ".git", "refs", "heads")))
		}, false, false},
		{"core.bare set", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "config", "core.bare", "true") }, true, false},
		{"core.bare set in config.worktree", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "config", "extensions.worktreeConfig", "true")
			require.NoError(t, os.WriteFile(filepath.Join(d.v1, ".git", "config.worktree"), []byte("[core]\n\tbare = true\n"), 0o644))
		}, true, false},
		{"core.worktree set in config.worktree", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "config", "extensions.worktreeConfig", "true")
			require.NoError(t, os.WriteFile(filepath.Join(d.v1, ".git", "config.worktree"), []byte("[core]\n\tworktree = ../pkg\n"), 0o644))
		}, true, false},
		{"extensions.worktreeConfig set alone", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "config", "extensions.worktreeConfig", "true")
		}, false, false},
		{"HEAD a link to /dev/null", direct, func(t *testing.T, d *deploy) {
			head := filepath.Join(d.v1, ".git", "HEAD")
			require.NoError(t, os.Remove(head))
			symlink(t, os.DevNull, head)
		}, true, false},
	}
	modes := []struct {
		name       string
		env        func(t testing.TB) *env
		alwaysRead bool
	}{
		{"always-read", func(testing.TB) *env { return settledEnv() }, true},
	}
	for _, m := range pathModes {
		modes = append(modes, struct {
			name       string
			env        func(t testing.TB) *env
			alwaysRead bool
		}{m.name, m.env, false})
	}
	t.Cleanup(func() { t.Logf("%d cases in %d modes compared with %s", len(cases), len(modes), gittest.Describe()) })
	for mi, mode := range modes {
		for ci, tc := range cases {
			if !onPath(ci, mi, len(modes)) {
				continue
			}
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				d := newDeploy(t)
				configured := map[target]string{
					direct:     filepath.Join(d.v1, "pkg", "run_agent.py"),
					viaCurrent: filepath.Join(d.root, "current", "pkg", "run_agent.py"),
					viaApp:     filepath.Join(d.root, "app", "run_agent.py"),
				}[tc.path]
				g, err := newGuard(Options{ModulePath: configured, HomeDir: tempDir(t), Check: map[bool]string{true: "read"}[mode.alwaysRead]}, mode.env(t))
				require.NoError(t, err)
				require.Equal(t, d.rev, g.Identity().Revision)
				require.NoError(t, checkWithin(t, g))
				require.NoError(t, checkWithin(t, g), "the fast path before the change")
				if mode.name == "watch" {
					require.True(t, onWatchPath(g), "the sweep's checkout is watched")
				}
				bound := g.Identity().ModulePath

				tc.change(t, d)
				for i, when := range []string{"right after the change", "on the next check"} {
					err := checkWithin(t, g)
					if tc.stale {
						assert.ErrorIs(t, err, ErrStale, "%s", when)
					} else {
						assert.NoError(t, err, "%s", when)
					}
					if i > 0 {
						continue
					}
					dir, rev, tracked, ok := gitVerdict(t, configured)
					gitCurrent := ok && rev == d.rev && tracked && filepath.Join(dir, filepath.Base(bound)) == bound
					if err == nil {
						assert.True(t, gitCurrent, "the guard says current, git says: dir %s, HEAD %q (ok %v), tracked %v", dir, rev, ok, tracked)
					} else if gitCurrent {
						assert.True(t, tc.failClosed, "the guard says stale where git agrees: %v", err)
					}
				}
			})
		}
	}
}

// A directory on the way to the module that holds HEAD, objects and refs
// but no valid HEAD is passed over, as git passes over it; once its HEAD is
// rewritten in place to a valid one (no rename, no new entry in the
// directory), git takes it for a bare repository, and so does every check.
func TestBareSignatureRewrittenInPlace(t *testing.T) {
	for _, m := range pathModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			d := newDeploy(t)
			pkg := filepath.Join(d.v1, "pkg")
			head := filepath.Join(pkg, "HEAD")
			require.NoError(t, os.WriteFile(head, []byte("not a ref, not yet\n"), 0o644))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "objects"), 0o755))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "refs"), 0o755))
			module := filepath.Join(pkg, "run_agent.py")
			_, rev, tracked, ok := gitVerdict(t, module)
			require.True(t, ok && tracked && rev == d.rev, "git passes over pkg")

			g := bindFast(t, module, m.env(t))
			require.Equal(t, d.rev, g.Identity().Revision)
			require.NoError(t, checkWithin(t, g))
			f, err := os.OpenFile(head, os.O_WRONLY|os.O_TRUNC, 0)
			require.NoError(t, err)
			_, err = f.WriteString("ref: refs/heads/main\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())

			_, _, tracked, _ = gitVerdict(t, module)
			require.False(t, tracked, "git takes pkg for a bare repository")
			assert.ErrorIs(t, checkWithin(t, g), ErrStale)
		})
	}
}

// A configured path with ".." after a link leads where the kernel (and the
// interpreter that loads the module) takes it: to the parent of the link's
// target, not of the link. The guard binds to that module, and sees its
// checkout move, and the link re-pointed.
func TestDotDotAfterALink(t *testing.T) {
	for _, m := range pathModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			root := tempDir(t)
			a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
			initRepo(t, a, map[string]string{"pkg/run_agent.py": "x = 'a'\n", "pkg/sub/keep": ""})
			revB := initRepo(t, b, map[string]string{"pkg/run_agent.py": "x = 'b'\n", "pkg/sub/keep": ""})
			symlink(t, filepath.Join(b, "pkg", "sub"), filepath.Join(a, "pkg", "l"))
			configured := a + "/pkg/l/../run_agent.py" // not cleaned: Join would
			data, err := os.ReadFile(configured)
			require.NoError(t, err)
			require.Equal(t, "x = 'b'\n", string(data), "the kernel reads b's module")

			g := bindFast(t, configured, m.env(t))
			assert.Equal(t, revB, g.Identity().Revision)
			assert.Equal(t, resolved(t, filepath.Join(b, "pkg", "run_agent.py")), g.Identity().ModulePath)
			require.NoError(t, checkWithin(t, g))
			commit(t, b, "pkg/run_agent.py", "x = 'b2'\n")
			assert.ErrorIs(t, checkWithin(t, g), ErrStale, "b moved")

			g = bindFast(t, configured, m.env(t))
			require.NoError(t, checkWithin(t, g))
			repoint(t, filepath.Join(a, "pkg", "sub"), filepath.Join(a, "pkg", "l"))
			assert.ErrorIs(t, checkWithin(t, g), ErrStale, "the link now leads into a")
		})
	}
}
