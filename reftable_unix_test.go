//go:build unix

package runtimeguard

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// needReftable skips the test, with the reason, where the git on PATH
// makes no reftable repository.
func needReftable(t *testing.T) {
	t.Helper()
	gittest.Need(t)
	if !gittest.HasReftable() {
		t.Skip("the git on PATH is older than 2.45 and makes no reftable repository; put a current one first (scripts/current-git.sh)")
	}
}

// manyBranches creates n branches at HEAD in one update-ref transaction.
func manyBranches(t *testing.T, dir string, n int) {
	t.Helper()
	var stdin strings.Builder
	for i := range n {
		fmt.Fprintf(&stdin, "create refs/heads/many/%05d HEAD\n", i)
	}
	cmd := gittest.Command(dir, "update-ref", "--stdin")
	cmd.Stdin = strings.NewReader(stdin.String())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "update-ref --stdin: %s", out)
}

// A reftable checkout, SHA-1 and SHA-256, the module in the main or in a
// linked worktree: bound to git's HEAD, and after each ref operation the
// guard agrees with git rev-parse HEAD in the module's directory, right
// after and on the next check, on every path (Options.Check "read", the stat path
// settled and not, the watch path). Each step says whether it moves HEAD,
// so that agreement is not reached by saying nothing.
func TestReftableAgainstGit(t *testing.T) {
	needReftable(t)
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
	type repo struct{ main, in, first string }
	steps := []struct {
		name  string
		do    func(t *testing.T, r repo)
		moves bool
	}{
		{"commit", func(t *testing.T, r repo) { commit(t, r.in, "run_agent.py", "x = 2\n") }, true},
		{"branch", func(t *testing.T, r repo) { git(t, r.in, "branch", "topic") }, false},
		{"checkout of another branch at the same commit", func(t *testing.T, r repo) { git(t, r.in, "checkout", "-q", "topic") }, false},
		{"branch -m of HEAD's branch", func(t *testing.T, r repo) { git(t, r.in, "branch", "-m", "topic", "renamed") }, false},
		{"branch -D of another branch", func(t *testing.T, r repo) {
			git(t, r.in, "branch", "extra", r.first)
			git(t, r.in, "branch", "-D", "extra")
		}, false},
		{"symbolic-ref HEAD through another symbolic ref", func(t *testing.T, r repo) {
			git(t, r.in, "symbolic-ref", "refs/heads/alias", "refs/heads/renamed")
			git(t, r.in, "symbolic-ref", "HEAD", "refs/heads/alias")
		}, false},
		{"pack-refs --all", func(t *testing.T, r repo) { git(t, r.main, "pack-refs", "--all") }, false},
		{"gc", func(t *testing.T, r repo) { git(t, r.main, "gc", "-q", "--prune=now") }, false},
		{"thousands of refs, packed", func(t *testing.T, r repo) {
			manyBranches(t, r.main, 3000)
			git(t, r.main, "pack-refs", "--all")
		}, false},
		{"commit among them", func(t *testing.T, r repo) { commit(t, r.in, "run_agent.py", "x = 3\n") }, true},
		{"worktree add", func(t *testing.T, r repo) {
			git(t, r.main, "worktree", "add", "-q", "--detach", filepath.Join(filepath.Dir(r.main), "other"))
		}, false},
		{"checkout of another branch at another commit", func(t *testing.T, r repo) {
			git(t, r.in, "checkout", "-q", "-f", "-b", "older", r.first)
		}, true},
		{"detached HEAD at the same commit", func(t *testing.T, r repo) { git(t, r.in, "checkout", "-q", "--detach") }, false},
		{"checkout of a branch at another commit", func(t *testing.T, r repo) { git(t, r.in, "checkout", "-q", "-f", "renamed") }, true},
		{"the branch moved from the main worktree", func(t *testing.T, r repo) {
			git(t, r.main, "update-ref", "refs/heads/renamed", r.first)
		}, true},
		{"the branch deleted", func(t *testing.T, r repo) {
			git(t, r.main, "update-ref", "-d", "refs/heads/renamed")
		}, true},
	}
	for _, mode := range modes {
		for _, format := range []string{"sha1", "sha256"} {
			for _, linked := range []bool{false, true} {
				kind := "main"
				if linked {
					kind = "linked"
				}
				t.Run(mode.name+"/"+format+"/"+kind, func(t *testing.T) {
					t.Parallel()
					root := tempDir(t)
					r := repo{main: filepath.Join(root, "main")}
					r.first = initRepo(t, r.main, map[string]string{"run_agent.py": "x = 1\n"}, "--ref-format=reftable", "--object-format="+format)
					r.in = r.main
					if linked {
						r.in = filepath.Join(root, "wt")
						git(t, r.main, "worktree", "add", "-q", "-b", "wtbranch", r.in)
					}
					module := filepath.Join(r.in, "run_agent.py")
					bind := func() *Guard {
						g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t), Check: map[bool]string{true: "read"}[mode.alwaysRead]}, mode.env(t))
						require.NoError(t, err)
						require.Equal(t, git(t, r.in, "rev-parse", "HEAD"), g.Identity().Revision, "bound to git's HEAD")
						require.NoError(t, checkWithin(t, g))
						require.NoError(t, checkWithin(t, g), "the fast path before the change")
						if mode.name == "watch" {
							require.True(t, onWatchPath(g), "a reftable checkout is watched")
						}
						if mode.name == "stat-settled" {
							require.True(t, trusted(g), "the snapshot of a settled reftable checkout is trusted")
						}
						return g
					}
					g := bind()
					for _, s := range steps {
						bound := g.Identity().Revision
						s.do(t, r)
						for _, when := range []string{"right after", "on the next check"} {
							err := checkWithin(t, g)
							_, rev, tracked, ok := gitVerdict(t, module)
							gitCurrent := ok && rev == bound && tracked
							assert.Equal(t, gitCurrent, err == nil, "%s, %s: the guard says %v, git says HEAD %q (ok %v), tracked %v", s.name, when, err, rev, ok, tracked)
							assert.Equal(t, s.moves, err != nil, "%s, %s: stale %v", s.name, when, err)
						}
						if s.moves && s.name != "the branch deleted" {
							g = bind()
						}
					}
				})
			}
		}
	}
}

// Eight goroutines check while ref updates that leave HEAD alone, and
// compactions that replace the stack's tables under the reads, go on: no
// check fails. Then a commit: every check that begins after it returned
// fails. On every path.
func TestReftableChecksRaceCompaction(t *testing.T) {
	needReftable(t)
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			dir := tempDir(t)
			module := filepath.Join(dir, "run_agent.py")
			initRepo(t, dir, map[string]string{"run_agent.py": "x = 1\n"}, "--ref-format=reftable")
			manyBranches(t, dir, 300)
			g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, mode.env(t))
			require.NoError(t, err)
			require.NoError(t, g.EnsureCurrent())

			var committing, moved, checks atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						after := moved.Load()
						err := g.EnsureCurrent()
						began := committing.Load()
						checks.Add(1)
						if began == 0 && err != nil {
							t.Errorf("a check failed while HEAD stayed: %v", err)
							return
						}
						if after > 0 && err == nil {
							t.Error("a check that began after the commit returned passed")
							return
						}
					}
				}()
			}
			for i := range 12 {
				switch i % 3 {
				case 0:
					git(t, dir, "branch", fmt.Sprintf("b%d", i))
				case 1:
					git(t, dir, "branch", "-D", fmt.Sprintf("b%d", i-1))
				case 2:
					git(t, dir, "pack-refs", "--all")
				}
			}
			committing.Store(1)
			commit(t, dir, "run_agent.py", "x = 2\n")
			moved.Store(1)
			for checks.Load() < 100 {
				git(t, dir, "pack-refs", "--all")
			}
			close(stop)
			wg.Wait()
			assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
			t.Logf("%d checks", checks.Load())
		})
	}
}
