//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// hermesUpdater starts the repository's stand-in for hermes update's hold
// on the checkout lock (testdata/hermes_updater.py, run in mode hold), and
// returns its first line ("locked", or "busy" once it gave up) and a way
// to end it, which returns its exit status.
func hermesUpdater(t *testing.T, lock string) (string, func() int) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "testdata", "hermes_updater.py"))
	require.NoError(t, err)
	cmd := exec.Command(python, "-I", script, "hold", lock)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line), func() int {
		stdin.Close()
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	}
}

// hermes update first: it holds the checkout lock, and the wrapper refuses
// without running its command, claiming the marker or writing a receipt.
func TestUpdateRefusesWhileHermesUpdateHoldsTheCheckout(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	state, end := hermesUpdater(t, filepath.Join(c.dir, ".git", "hermes-update.lock"))
	require.Equal(t, "locked", state)
	ran := filepath.Join(gittest.TempDir(t), "ran")
	r := c.update(t, "sh", "-c", "touch "+ran)
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "another update of the checkout runs")
	assert.NoFileExists(t, ran, "the command ran")
	assert.NoFileExists(t, filepath.Join(c.home, ".hermes-update-in-progress"))
	assert.NoDirExists(t, filepath.Join(c.home, "logs"), "a receipt was written")
	assert.Equal(t, 0, end())
}

// The wrapper first: while its command (and what that command started)
// runs, hermes update finds the checkout locked and gives up busy; its
// marker is of the updater's current format, with this process's creation
// time.
func TestHermesUpdateRefusedWhileTheWrapperRuns(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	// The command starts a child that outlives it, then ends: the child
	// holds the inherited lock until it is released.
	release := holdingUpdate(t, c.module, c.home)

	state, end := hermesUpdater(t, filepath.Join(c.dir, ".git", "hermes-update.lock"))
	assert.Equal(t, "busy", state, "the wrapper's command's child holds the checkout")
	assert.Equal(t, 2, end())

	release() // the child reads to the end, and exits
	require.Eventually(t, func() bool {
		state, end := hermesUpdater(t, filepath.Join(c.dir, ".git", "hermes-update.lock"))
		end()
		return state == "locked"
	}, 30*time.Second, 10*time.Millisecond, "the checkout is free once the child ended")
}

// holdingUpdate runs the wrapper on module, with home, and a command that
// starts a child which outlives it and holds the inherited locks until
// the returned function is called; it returns once the wrapper exited.
func holdingUpdate(t *testing.T, module, home string) (release func()) {
	t.Helper()
	tmp := gittest.TempDir(t)
	started, gate := filepath.Join(tmp, "started"), filepath.Join(tmp, "gate")
	require.NoError(t, syscall.Mkfifo(gate, 0o600))
	t.Cleanup(func() { // lets a child left by a failure end
		if f, err := os.OpenFile(gate, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	release = func() { // the child reads the gate to its end, and exits
		f, err := os.OpenFile(gate, os.O_WRONLY, 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	args := []string{"update", "--module", module, "--home", home, "--wait", "200ms", "--",
		"sh", "-c", `(cat "$1" >/dev/null 2>&1 </dev/null) & touch "$0"`, started, gate}
	cmd := commandProcess(args...)
	cmd.Env = append(cmd.Env, gittest.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, cmd.Wait(), stderr.String())
	return release
}

// The wrapper takes the checkout lock where a guard probes it, in every
// layout where the two could disagree: core.worktree set in a Git
// directory above the worktree (no .git in the worktree), and a stray
// empty .git in the module's directory that git passes over. While the
// wrapper's command's child runs, the guard finds the lock held and plans
// nothing; the lock is never a file in the worktree.
func TestUpdateLocksWhereTheGuardProbes(t *testing.T) {
	cases := map[string]func(t *testing.T, tmp string) (module, common string){
		"core.worktree set in a Git directory above the worktree": func(t *testing.T, tmp string) (string, string) {
			top := filepath.Join(tmp, "top")
			wt := filepath.Join(top, "wt")
			require.NoError(t, os.MkdirAll(wt, 0o755))
			git(t, top, "init", "-q")
			git(t, top, "config", "core.worktree", "../wt")
			gittest.WriteFile(t, filepath.Join(wt, "run_agent.py"), "class AIAgent: pass\n")
			git(t, wt, "add", "run_agent.py")
			git(t, wt, "commit", "-qm", "one")
			return filepath.Join(wt, "run_agent.py"), filepath.Join(top, ".git")
		},
		"a stray empty .git in the module's directory": func(t *testing.T, tmp string) (string, string) {
			repo := filepath.Join(tmp, "repo")
			gittest.Init(t, repo, map[string]string{"agent/run_agent.py": "class AIAgent: pass\n"})
			require.NoError(t, os.Mkdir(filepath.Join(repo, "agent", ".git"), 0o755))
			return filepath.Join(repo, "agent", "run_agent.py"), filepath.Join(repo, ".git")
		},
	}
	for name, layout := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // processes, files and repositories of its own
			tmp := gittest.Resolved(t, gittest.TempDir(t))
			module, common := layout(t, tmp)
			home := filepath.Join(tmp, "home")
			require.NoError(t, os.Mkdir(home, 0o755))
			g, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: home})
			require.NoError(t, err)
			t.Cleanup(func() { g.Close() })

			release := holdingUpdate(t, module, home)
			o := g.Observe()
			assert.Equal(t, "held", o.CheckoutLock, "%s: %s", o.CheckoutLockPath, o.CheckoutLockReason)
			assert.Equal(t, filepath.Join(common, "hermes-update.lock"), o.CheckoutLockPath)
			assert.Equal(t, runtimeguard.UpdateActive, o.State)
			assert.NoFileExists(t, filepath.Join(filepath.Dir(module), ".hermes-update.lock"), "a lock file in the worktree")
			assert.NoFileExists(t, filepath.Join(filepath.Dir(module), ".git", "hermes-update.lock"), "a lock in the stray .git")

			gittest.WriteFile(t, module, "class AIAgent: revision = 2\n")
			git(t, filepath.Dir(module), "commit", "-qam", "two")
			_, err = g.PlanReload(context.Background())
			require.ErrorIs(t, err, runtimeguard.ErrNotReady)
			assert.ErrorContains(t, err, "is held")

			release()
			require.Eventually(t, func() bool { return g.Observe().CheckoutLock == "free" }, 10*time.Second, 5*time.Millisecond, "the child ended")
		})
	}
}

// In a checkout whose worktree holds no .git (core.worktree set in the Git
// directory above it), a link the repository tracks at the updater's
// lock name in the worktree: the wrapper locks the Git directory's file,
// and never writes through the link; the guard probes the updater's path
// as the updater would open it, and plans on the wrapper's success
// receipt.
func TestUpdateNeverWritesThroughATrackedLink(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	tmp := gittest.Resolved(t, gittest.TempDir(t))
	top := filepath.Join(tmp, "top")
	wt := filepath.Join(top, "wt")
	require.NoError(t, os.MkdirAll(wt, 0o755))
	target := filepath.Join(tmp, "precious")
	gittest.WriteFile(t, target, "keep\n")
	git(t, top, "init", "-q")
	git(t, top, "config", "core.worktree", "../wt")
	module := filepath.Join(wt, "run_agent.py")
	gittest.WriteFile(t, module, "class AIAgent: pass\n")
	require.NoError(t, os.Symlink(target, filepath.Join(wt, ".hermes-update.lock")))
	git(t, wt, "add", "run_agent.py", ".hermes-update.lock")
	git(t, wt, "commit", "-qm", "one")
	home := filepath.Join(tmp, "home")
	require.NoError(t, os.Mkdir(home, 0o755))
	g, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: home})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })

	cmd := commandProcess("update", "--module", module, "--home", home, "--",
		"sh", "-c", `echo "class AIAgent: revision = 2" > run_agent.py && git commit -qam two`)
	cmd.Env = append(cmd.Env, gittest.Env...)
	r := runProcess(t, cmd)
	require.Equal(t, 0, r.code, r.stderr)
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep\n", string(data), "the file the tracked link leads to")
	assert.FileExists(t, filepath.Join(top, ".git", "hermes-update.lock"))

	o := g.Observe()
	assert.Equal(t, "free", o.CheckoutLock, "%s: %s", o.CheckoutLockPath, o.CheckoutLockReason)
	require.ErrorIs(t, g.EnsureCurrent(), runtimeguard.ErrStale)
	plan, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	plan.Release()
}

// Two clones share one home (the issue of a default ~/.hermes, or one
// --home): b moves by a plain git pull, which nothing proves; then a is
// updated under runtimeguard update -- git pull, to the same revision. The
// wrapper's receipt names a: a's guard plans on it, b's never does, and
// b's 409 stays the manual one.
func TestUpdateReceiptProvesOnlyItsCheckout(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	other := filepath.Join(filepath.Dir(c.dir), "other")
	git(t, filepath.Dir(c.dir), "clone", "-q", c.upstream, other)
	git(t, other, "reset", "-q", "--hard", c.loaded) // where the first clone is
	otherModule := filepath.Join(other, "run_agent.py")
	ga, err := runtimeguard.New(runtimeguard.Options{ModulePath: c.module, HomeDir: c.home})
	require.NoError(t, err)
	t.Cleanup(func() { ga.Close() })
	gb, err := runtimeguard.New(runtimeguard.Options{ModulePath: otherModule, HomeDir: c.home})
	require.NoError(t, err)
	t.Cleanup(func() { gb.Close() })

	git(t, other, "pull", "-q", "--ff-only")
	r := c.update(t, "git", "pull", "-q", "--ff-only")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, gittest.Resolved(t, c.dir), c.receipt(t)["runtimeguard_checkout"], "the receipt names its checkout")
	id, err := updater.CheckoutID(c.dir)
	require.NoError(t, err)
	assert.Equal(t, id, c.receipt(t)["runtimeguard_checkout_id"], "and its identity")

	require.ErrorIs(t, ga.EnsureCurrent(), runtimeguard.ErrStale)
	plan, err := ga.PlanReload(context.Background())
	require.NoError(t, err)
	plan.Release()

	err = gb.EnsureCurrent()
	var se *runtimeguard.StaleError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Message, "manually")
	_, err = gb.PlanReload(context.Background())
	require.ErrorIs(t, err, runtimeguard.ErrNotReady)
	assert.ErrorContains(t, err, "nothing proves this move")
}

// The wrapper's last receipt write fails (here its command put a
// directory where the run's own receipt goes, so that the final write
// stops before latest.json; the directory is gone after): the marker is
// removed and the locks freed, and latest.json still says running. That update has ended: a guard
// plans nothing on it and does not say a reload comes, and a Reloader's
// 409 is the manual one.
func TestUpdateWhoseLastReceiptWriteFailed(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	g, err := runtimeguard.New(runtimeguard.Options{ModulePath: c.module, HomeDir: c.home})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rl, err := runtimeguard.NewReloader(ctx, g, runtimeguard.ReloaderOptions{
		Restart:       func(context.Context, *runtimeguard.Plan) error { return nil },
		ProofInterval: 10 * time.Millisecond,
	})
	require.NoError(t, err)

	receipts := filepath.Join(c.home, "logs", "update_receipts")
	script := `f="$0/latest.json"
id=$(sed -n 's/.*"update_id": "\(.*\)".*/\1/p' "$f")
pid=$(sed -n 's/.*"pid": \([0-9]*\).*/\1/p' "$f")
at=$(sed -n 's/.*"started_at": "\([0-9-]*T[0-9:]*\).*/\1Z/p' "$f" | tr -d ':-')
mkdir "$0/update_${at}_${pid}_${id}.json" && git pull -q --ff-only`
	r := c.update(t, "sh", "-c", script, receipts)
	require.NotEqual(t, 0, r.code, "the last receipt could not be written: %s", r.stderr)
	assert.Equal(t, "running", c.receipt(t)["outcome"], "latest.json")
	obstacles, err := filepath.Glob(filepath.Join(receipts, "update_*.json"))
	require.NoError(t, err)
	for _, dir := range obstacles {
		require.NoError(t, os.Remove(dir)) // what made the write fail is gone; the receipt stays
	}
	assert.NoFileExists(t, filepath.Join(c.home, ".hermes-update-in-progress"))

	require.ErrorIs(t, g.EnsureCurrent(), runtimeguard.ErrStale)
	_, err = g.PlanReload(context.Background())
	require.ErrorIs(t, err, runtimeguard.ErrNotReady)
	assert.ErrorContains(t, err, "ended without finishing it")
	srv := httptest.NewServer(rl.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})))
	t.Cleanup(srv.Close)
	require.Eventually(t, func() bool {
		resp, err := http.Get(srv.URL)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusConflict && strings.Contains(string(body), "manually")
	}, 10*time.Second, 5*time.Millisecond, "the 409 is the manual one")
}
