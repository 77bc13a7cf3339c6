//go:build unix

package runtimeguard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// A FIFO at the receipt's path is refused at once.
func TestPlanReloadFIFOReceipt(t *testing.T) {
	c := newReloadCase(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(c.receiptPath()), 0o755))
	gittest.Mkfifo(t, c.receiptPath())
	done := make(chan error, 1)
	go func() { _, err := c.g.PlanReload(context.Background()); done <- err }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "named pipe")
	case <-time.After(10 * time.Second):
		t.Fatal("PlanReload blocked on a FIFO receipt")
	}
}

// A deploy that flips a link loads the install the link leads to now: its
// recovery markers stop a plan as the bound install's do, and the stale
// answer and the observation report them.
func TestPlanReloadSeesTheNewInstallsRecoveryMarkers(t *testing.T) {
	root := tempDir(t)
	v1, v2 := filepath.Join(root, "v1"), filepath.Join(root, "v2")
	_, loaded := agentRepo(t, v1)
	git(t, root, "clone", "-q", v1, v2)
	moved := commit(t, v2, "run_agent.py", "class AIAgent: revision = 2\n")
	current := filepath.Join(root, "hermes-agent") // where Hermes's installer puts its checkout, here a link
	require.NoError(t, os.Symlink("v1", current))
	home := root
	g, err := New(Options{ModulePath: filepath.Join(current, "run_agent.py"), HomeDir: home})
	require.NoError(t, err)
	require.Equal(t, loaded, g.Identity().Revision)

	require.NoError(t, os.Symlink("v2", current+".new"))
	require.NoError(t, os.Rename(current+".new", current))
	writeFile(t, filepath.Join(v2, hermesIncomplete), "")
	writeFile(t, filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", loaded, moved, time.Now()))
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, UpdateIncomplete, se.State, "the 409 says the install it leads to is half updated")
	assert.Contains(t, g.Observe().RecoveryMarkers, filepath.Join(resolved(t, v2), hermesIncomplete))
	r, err := g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	assert.Nil(t, r)
	assert.ErrorContains(t, err, filepath.Join(resolved(t, v2), hermesIncomplete))

	require.NoError(t, os.Remove(filepath.Join(v2, hermesIncomplete)))
	r, err = g.PlanReload(context.Background())
	require.NoError(t, err)
	assert.Equal(t, moved, r.To)
	require.NoError(t, r.Bind(context.Background()))
	assert.Equal(t, resolved(t, v2), g.Identity().SourceDir)
	assert.NoError(t, g.EnsureCurrent())
}

// A link at the layout's lock in the home: PlanReload neither creates a
// file where the link leads nor opens one there; it plans nothing, and
// says why.
func TestPlanReloadNeverLocksThroughALink(t *testing.T) {
	for _, dangling := range []bool{false, true} {
		c := newReloadCase(t)
		c.success(t)
		target := filepath.Join(tempDir(t), "elsewhere")
		if !dangling {
			writeFile(t, target, "keep\n")
		}
		require.NoError(t, os.Symlink(target, filepath.Join(c.home, "update.lock")))
		r, err := c.g.PlanReload(context.Background())
		r.Release()
		require.ErrorIs(t, err, ErrNotReady, "dangling %v", dangling)
		assert.ErrorContains(t, err, "symbolic link")
		if dangling {
			assert.NoFileExists(t, target, "a lock file made where the link leads")
		} else {
			data, err := os.ReadFile(target)
			require.NoError(t, err)
			assert.Equal(t, "keep\n", string(data))
		}
	}
}

// A layout's lock in a directory of the home that is a link (to a
// directory, or dangling): the plan creates no lock file where it leads,
// plans nothing, and says why; the home itself may be a link.
func TestPlanReloadNeverLocksInADirectoryLink(t *testing.T) {
	for _, dangling := range []bool{false, true} {
		tmp := tempDir(t)
		home := filepath.Join(tmp, "home")
		dir := filepath.Join(home, "hermes-agent")
		module, loaded := agentRepo(t, dir)
		victim := filepath.Join(tmp, "victim")
		if !dangling {
			require.NoError(t, os.Mkdir(victim, 0o755))
		}
		require.NoError(t, os.Symlink(victim, filepath.Join(home, "run")))
		layout := HermesLayout
		layout.Lock = "run/update.lock"
		g, err := New(Options{ModulePath: module, HomeDir: home, Layout: layout})
		require.NoError(t, err)
		defer g.Close()
		moved := commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n")
		writeFile(t, filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", loaded, moved, time.Now()))
		r, err := g.PlanReload(context.Background())
		r.Release()
		require.ErrorIs(t, err, ErrNotReady, "dangling %v", dangling)
		assert.ErrorContains(t, err, "symbolic link")
		assert.NoFileExists(t, filepath.Join(victim, "update.lock"), "a lock file made where the link leads")
	}
	// The home through a link: the user's choice.
	tmp := tempDir(t)
	home := filepath.Join(tmp, "home")
	module, loaded := agentRepo(t, filepath.Join(home, "hermes-agent"))
	require.NoError(t, os.Mkdir(filepath.Join(home, "run"), 0o755))
	linked := filepath.Join(tmp, "home-link")
	require.NoError(t, os.Symlink(home, linked))
	layout := HermesLayout
	layout.Lock = "run/update.lock"
	g, err := New(Options{ModulePath: module, HomeDir: linked, Layout: layout})
	require.NoError(t, err)
	defer g.Close()
	moved := commit(t, filepath.Join(home, "hermes-agent"), "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", loaded, moved, time.Now()))
	r, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	r.Release()
	assert.FileExists(t, filepath.Join(home, "run", "update.lock"))
}

// A plan takes the layout's lock shared with read access alone: its lock
// file is open for reading only, so a server that may read the lock file
// but not write it still plans.
func TestPlanHoldsTheLockForReadingOnly(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	lock := filepath.Join(c.home, "update.lock")
	writeFile(t, lock, "")
	require.NoError(t, os.Chmod(lock, 0o444))
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer r.Release()
	flags, err := unix.FcntlInt(r.LockFile().Fd(), unix.F_GETFL, 0)
	require.NoError(t, err)
	assert.Equal(t, unix.O_RDONLY, flags&unix.O_ACCMODE, "the plan's lock file is open for reading alone")
}

// runningReceipt is a receipt of outcome running, as an updater writes it
// before its command, naming its writer by the JSON fields given.
func runningReceipt(pre, writer string) string {
	return fmt.Sprintf(`{"schema": 1, "update_id": "u-running", "outcome": "running", "started_at": %q, "pre_update": {"sha": %q}%s}`,
		time.Now().UTC().Format(time.RFC3339Nano), pre, writer)
}

// A receipt that still says running, whose update provably ended (no
// marker, the checkout lock free, the process that wrote it gone) proves
// nothing and promises nothing: no plan, not pending, and a Reloader's 409
// is the manual one, not "shortly". Where its writer lives, or the receipt
// names none, or names one of another platform's range, the update may
// still finish it: a plan is awaited.
func TestOrphanedRunningReceipt(t *testing.T) {
	dead := gittest.ExitedPID(t, processGone)
	own := updater.OwnIdentity()
	ownCT := ""
	if own.HasCreated {
		ownCT = fmt.Sprintf(`, "pid_create_time": %f`, own.Created)
	}
	cases := []struct {
		name, writer string
		ended        bool
	}{
		{"its writer gone", fmt.Sprintf(`, "pid": %d, "pid_create_time": 1700000000.5`, dead), true},
		{"its writer gone, no creation time", fmt.Sprintf(`, "pid": %d`, dead), true},
		{"its writer and the one that persisted it gone", fmt.Sprintf(`, "pid": %d, "writer_pid": %d`, dead, dead), true},
		{"its writer alive", fmt.Sprintf(`, "pid": %d%s`, os.Getpid(), ownCT), false},
		{"its writer gone, the one that persisted it alive", fmt.Sprintf(`, "pid": %d, "writer_pid": %d`, dead, os.Getpid()), false},
		{"no writer named", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newReloaderCase(t, nil)
			c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
			c.writeReceipt(t, runningReceipt(c.loaded, tc.writer))
			_, err := c.g.PlanReload(context.Background())
			require.ErrorIs(t, err, ErrNotReady)
			assert.Equal(t, !tc.ended, isPending(err), "%v", err)
			if !tc.ended {
				require.Eventually(t, func() bool {
					a := c.get(t, "/")
					return a.code == http.StatusConflict && a.payload.Error == c.g.config().autoMessage
				}, 10*time.Second, 5*time.Millisecond, "the 409 awaits the update")
				return
			}
			assert.ErrorContains(t, err, "ended without finishing it")
			require.Eventually(t, func() bool {
				a := c.get(t, "/")
				return a.code == http.StatusConflict && a.payload.Error == c.g.config().message
			}, 10*time.Second, 5*time.Millisecond, "the 409 is the manual one")
			a := c.get(t, "/")
			assert.Contains(t, a.payload.Error, "manually")
			assert.False(t, a.payload.RestartScheduled)
		})
	}
}

// gitSyncCase is git-sync's root: a repository at upstream's revisions,
// worktrees under .worktrees, and the link agent a guard binds through.
type gitSyncCase struct {
	upstream, root, link string
	revs                 []string // upstream's revisions, oldest first
}

// newGitSyncCase makes upstream with two revisions and publishes the
// first at the link.
func newGitSyncCase(t *testing.T) *gitSyncCase {
	t.Helper()
	tmp := tempDir(t)
	c := &gitSyncCase{upstream: filepath.Join(tmp, "upstream"), root: filepath.Join(tmp, "git")}
	c.link = filepath.Join(c.root, "agent")
	_, first := agentRepo(t, c.upstream)
	c.revs = []string{first, commit(t, c.upstream, "run_agent.py", "class AIAgent: revision = 2\n")}
	git(t, tmp, "clone", "-q", "--bare", c.upstream, filepath.Join(c.root, ".git"))
	c.flip(t, c.worktree(t, first, first))
	return c
}

// worktree adds the worktree .worktrees/name at revision rev, as
// git-sync's createWorktree does (detached, then reset to rev), and
// returns its path relative to the root.
func (c *gitSyncCase) worktree(t *testing.T, name, rev string) string {
	t.Helper()
	rel := filepath.Join(".worktrees", name)
	git(t, c.root, "worktree", "add", "-q", "--force", "--detach", rel, rev, "--no-checkout")
	git(t, filepath.Join(c.root, rel), "reset", "-q", "--hard", rev, "--")
	return rel
}

// flip points the link at target as git-sync's publishSymlink does: a new
// link tmp-link renamed over it.
func (c *gitSyncCase) flip(t *testing.T, target string) {
	t.Helper()
	tmp := filepath.Join(c.root, "tmp-link")
	require.NoError(t, os.Symlink(target, tmp))
	require.NoError(t, os.Rename(tmp, c.link))
}

// guard binds a guard with git-sync's layout through the link.
func (c *gitSyncCase) guard(t *testing.T) *Guard {
	t.Helper()
	g, err := New(Options{ModulePath: filepath.Join(c.link, "run_agent.py"), Layout: GitSyncLayout(c.link)})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	require.Equal(t, c.revs[0], g.Identity().Revision)
	return g
}

// A flip to a worktree at the revision it is named after proves a reload,
// once; the guard bound anew finds nothing left to reload.
func TestGitSyncFlipProvesAReload(t *testing.T) {
	c := newGitSyncCase(t)
	g := c.guard(t)
	_, err := g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady, "before any flip")

	c.flip(t, c.worktree(t, c.revs[1], c.revs[1]))
	require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
	r, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	defer r.Release()
	assert.Equal(t, c.revs[0], r.From)
	assert.Equal(t, c.revs[1], r.To)
	assert.Equal(t, "success", r.Receipt.Outcome)
	assert.Equal(t, c.link, r.Receipt.ID[len(flipPrefix):len(flipPrefix)+len(c.link)])
	require.NoError(t, r.Bind(context.Background()))
	assert.Equal(t, c.revs[1], g.Identity().Revision)
	assert.NoError(t, g.EnsureCurrent())
	_, err = g.PlanReload(context.Background())
	assert.ErrorContains(t, err, "not stale")
}

// Each refusal: the flip seen at the binding, a worktree whose HEAD is not
// the revision it is named after, a module not tracked there, a link that
// leads to no worktree named by a revision or to another worktree than
// the module's, and a flip a scheduled plan spent.
func TestGitSyncRefusals(t *testing.T) {
	t.Run("the flip seen at the binding", func(t *testing.T) {
		c := newGitSyncCase(t)
		g := c.guard(t)
		// The worktree the link led to when the guard bound moves: the
		// guard is stale, and the link the same.
		wt := filepath.Join(c.root, ".worktrees", c.revs[0])
		git(t, wt, "reset", "-q", "--hard", c.revs[1])
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err := g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "nothing proves this move")
		assert.False(t, isPending(err))
	})
	t.Run("HEAD is not the revision the worktree is named after", func(t *testing.T) {
		c := newGitSyncCase(t)
		g := c.guard(t)
		third := commit(t, c.upstream, "run_agent.py", "class AIAgent: revision = 3\n")
		git(t, c.root, "fetch", "-q", c.upstream, third)
		c.flip(t, c.worktree(t, c.revs[1], third))
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err := g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "is for revision "+c.revs[1]+", and HEAD is at "+third)
	})
	t.Run("the module is not tracked there", func(t *testing.T) {
		c := newGitSyncCase(t)
		g := c.guard(t)
		git(t, c.upstream, "rm", "-q", "--cached", "run_agent.py")
		git(t, c.upstream, "commit", "-q", "-m", "untrack the module")
		untracked := git(t, c.upstream, "rev-parse", "HEAD")
		git(t, c.root, "fetch", "-q", c.upstream, untracked)
		rel := c.worktree(t, untracked, untracked)
		writeFile(t, filepath.Join(c.root, rel, "run_agent.py"), "class AIAgent: pass\n")
		c.flip(t, rel)
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err := g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "is no longer tracked")
	})
	t.Run("the link leads to no worktree named by a revision", func(t *testing.T) {
		c := newGitSyncCase(t)
		g := c.guard(t)
		c.flip(t, c.worktree(t, "next", c.revs[1]))
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err := g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "not to a worktree .worktrees/<revision>")
	})
	t.Run("the module is in another worktree", func(t *testing.T) {
		c := newGitSyncCase(t)
		// The guard binds through a link of its own that leads where
		// git-sync's does, until they part.
		own := filepath.Join(c.root, "own")
		require.NoError(t, os.Symlink(filepath.Join(".worktrees", c.revs[0]), own))
		g, err := New(Options{ModulePath: filepath.Join(own, "run_agent.py"), Layout: GitSyncLayout(c.link)})
		require.NoError(t, err)
		defer g.Close()
		c.flip(t, c.worktree(t, c.revs[1], c.revs[1]))
		elsewhere := filepath.Join(filepath.Dir(c.root), "elsewhere")
		git(t, c.root, "worktree", "add", "-q", "--detach", filepath.Join(elsewhere, ".worktrees", c.revs[1]), c.revs[1])
		require.NoError(t, os.Remove(own))
		require.NoError(t, os.Symlink(filepath.Join(elsewhere, ".worktrees", c.revs[1]), own))
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err = g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "and the module is in "+resolved(t, filepath.Join(elsewhere, ".worktrees", c.revs[1])))
	})
	t.Run("a spent flip", func(t *testing.T) {
		c := newGitSyncCase(t)
		g := c.guard(t)
		rel := c.worktree(t, c.revs[1], c.revs[1])
		c.flip(t, rel)
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		r, err := g.PlanReload(context.Background())
		require.NoError(t, err)
		require.NoError(t, r.Schedule())
		r.Release()
		_, err = g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.ErrorContains(t, err, "already scheduled on the receipt "+r.Receipt.ID)
		// A new flip to the same worktree is a new proof.
		c.flip(t, rel)
		r2, err := g.PlanReload(context.Background())
		require.NoError(t, err)
		defer r2.Release()
		assert.NotEqual(t, r.Receipt.ID, r2.Receipt.ID)
	})
}

// A layout proves by its link or by receipts, never both; one with a link
// needs no marker.
func TestGitSyncLayoutValidation(t *testing.T) {
	l := GitSyncLayout("/git/agent")
	assert.NoError(t, l.validate())
	assert.False(t, l.isZero())
	l.Receipt = "latest.json"
	assert.ErrorContains(t, l.validate(), "Layout.Link")
}

// A plan made right after the flip, before any check read the checkout
// again, sees the same: the directory the link now leads to is one whose
// recovery markers count, found by the plan's own read, not a change
// while it read.
func TestGitSyncFlipProvesAReloadBeforeAnyCheck(t *testing.T) {
	c := newGitSyncCase(t)
	g := c.guard(t)
	c.flip(t, c.worktree(t, c.revs[1], c.revs[1]))
	r, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	defer r.Release()
	assert.Equal(t, c.revs[1], r.To)
	assert.Equal(t, filepath.Join(c.root, ".worktrees", c.revs[1]), r.Identity.SourceDir)
}

// git-sync flipping A, B, A, B: every flip is reloaded, the last too,
// though it leads where the second did (its link file may even reuse that
// one's inode): what a plan spent is forgotten once the binding it moved
// is gone, and a flip's receipt is named by what it leads to and when it
// was made, never by its link's file.
func TestGitSyncFlipsBackAndForth(t *testing.T) {
	c := newGitSyncCase(t)
	g := c.guard(t)
	a := filepath.Join(".worktrees", c.revs[0])
	b := c.worktree(t, c.revs[1], c.revs[1])
	var ids []string
	for i, to := range []string{b, a, b, a} {
		c.flip(t, to)
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale, "flip %d", i)
		r, err := g.PlanReload(context.Background())
		require.NoError(t, err, "flip %d", i)
		require.NoError(t, r.Schedule(), "flip %d", i)
		require.NoError(t, r.Bind(context.Background()), "flip %d", i)
		require.NoError(t, g.EnsureCurrent(), "flip %d", i)
		st, err := fsread.LstatStamp(c.link)
		require.NoError(t, err)
		assert.NotContains(t, r.Receipt.ID, st.FileID(), "a flip's ID names no file identity")
		assert.Contains(t, r.Receipt.ID, to, "a flip's ID names what it leads to")
		assert.NotContains(t, ids, r.Receipt.ID)
		ids = append(ids, r.Receipt.ID)
	}
}

// pyUpdater is testdata/hermes_updater.py, run in a mode: a process that
// takes the checkout lock as the Hermes updater does.
type pyUpdater struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startPyUpdater(t *testing.T, args ...string) *pyUpdater {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH")
	}
	script, err := filepath.Abs(filepath.Join("testdata", "hermes_updater.py"))
	require.NoError(t, err)
	cmd := exec.Command(python, append([]string{"-I", script}, args...)...)
	cmd.Stderr = os.Stderr
	p := &pyUpdater{cmd: cmd}
	p.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p.out = bufio.NewReader(out)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		p.stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

// line reads the script's next line.
func (p *pyUpdater) line(t *testing.T) string {
	t.Helper()
	s, err := p.out.ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(s)
}

// The updater's completion child holds the checkout lock after its parent
// wrote the success receipt and exited (its marker long gone): the update
// is in progress, and no reload is proven until that child exits.
func TestCheckoutLockHeldByAChildAfterItsOwnerExited(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	lock := filepath.Join(c.dir, ".git", "hermes-update.lock")
	p := startPyUpdater(t, "handoff", lock)
	first := p.line(t)
	child, err := strconv.Atoi(strings.TrimPrefix(first, "child "))
	require.NoError(t, err, "%q", first)
	t.Cleanup(func() { _ = unix.Kill(child, unix.SIGKILL) })
	require.NoError(t, p.cmd.Wait(), "the owner exited")

	o := c.g.Observe()
	assert.Equal(t, UpdateActive, o.State)
	assert.Equal(t, lockHeld, o.CheckoutLock)
	assert.Equal(t, lock, o.CheckoutLockPath)
	_, err = c.g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	assert.ErrorContains(t, err, "the checkout lock "+lock+" is held")
	assert.True(t, isPending(err), "an update still runs: a proof may come")
	var se *StaleError
	require.ErrorAs(t, c.g.EnsureCurrent(), &se)
	assert.Equal(t, UpdateActive, se.State)

	p.stdin.Close() // the child reads its stdin, the pipe the owner passed on, to its end
	require.Eventually(t, func() bool { return unix.Kill(child, 0) == unix.ESRCH || isZombie(child) },
		10*time.Second, 5*time.Millisecond, "the child exits")
	require.Eventually(t, func() bool { return c.g.Observe().CheckoutLock == lockFree }, 10*time.Second, 5*time.Millisecond)
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err, "the lock free, the receipt proves")
	r.Release()
}

// Hermes's updater locks the install root by its own rule, which reads
// only <root>/.git: installed in a folder of a larger repository it locks
// <root>/.hermes-update.lock, and with a stray empty .git there (which git
// passes over) <root>/.git/hermes-update.lock, while git's discovery finds
// the outer repository's common directory. Its completion child holding
// that lock after its parent wrote the success receipt keeps the update
// active, and no reload is proven.
func TestCheckoutLockWhereHermesTakesIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lock makes the layout in root and returns where Hermes locks it.
		lock func(t *testing.T, root string) string
	}{
		{"an install root below the top level", func(t *testing.T, root string) string {
			return filepath.Join(root, ".hermes-update.lock")
		}},
		{"a stray empty .git in the install root", func(t *testing.T, root string) string {
			require.NoError(t, os.Mkdir(filepath.Join(root, ".git"), 0o755))
			return filepath.Join(root, ".git", "hermes-update.lock")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(resolved(t, tempDir(t)), "home")
			mono := filepath.Join(home, "mono")
			root := filepath.Join(mono, "hermes-agent")
			loaded := initRepo(t, mono, map[string]string{"hermes-agent/run_agent.py": "class AIAgent: pass\n"})
			hermesLock := tc.lock(t, root)
			g, err := New(Options{ModulePath: filepath.Join(root, "run_agent.py"), HomeDir: home})
			require.NoError(t, err)
			defer g.Close()
			moved := commit(t, mono, "hermes-agent/run_agent.py", "class AIAgent: revision = 2\n")

			p := startPyUpdater(t, "hold", hermesLock)
			require.Equal(t, "locked", p.line(t))
			writeFile(t, filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", loaded, moved, time.Now()))

			o := g.Observe()
			assert.Equal(t, lockHeld, o.CheckoutLock, "%s: %s", o.CheckoutLockPath, o.CheckoutLockReason)
			assert.Equal(t, hermesLock, o.CheckoutLockPath)
			assert.Equal(t, UpdateActive, o.State)
			_, err = g.PlanReload(context.Background())
			require.ErrorIs(t, err, ErrNotReady)
			assert.ErrorContains(t, err, "the checkout lock "+hermesLock+" is held")
			assert.True(t, isPending(err), "an update still runs: %v", err)
		})
	}
}

// isZombie reports whether pid has exited and waits to be reaped.
func isZombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && len(stat) > i+2 && stat[i+2] == 'Z'
}

// The checkout's lock is in its Git directory: held by a process that took
// it as the updater does, the update is active; free once that ends.
func TestCheckoutLockHeldAndFreed(t *testing.T) {
	c := newReloadCase(t)
	assert.Equal(t, filepath.Join(c.dir, ".git", "hermes-update.lock"), c.g.Observe().CheckoutLockPath)

	p := startPyUpdater(t, "hold", filepath.Join(c.dir, ".git", "hermes-update.lock"))
	require.Equal(t, "locked", p.line(t))
	assert.Equal(t, UpdateActive, c.g.Observe().State)
	p.stdin.Close()
	require.NoError(t, p.cmd.Wait())
	assert.Equal(t, lockFree, c.g.Observe().CheckoutLock)
}

// A guard's probes never make a starting updater fail: the updater's own
// acquire (each try 20 ms apart for 3 s) races guards that probe the lock
// back to back, through Observe, for hundreds of rounds, and never gives
// up.
func TestProbesNeverMakeTheUpdaterFail(t *testing.T) {
	c := newReloadCase(t)
	lock := filepath.Join(c.dir, ".git", "hermes-update.lock")
	writeFile(t, lock, "")
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	done := make(chan struct{})
	probed := make(chan int, 2)
	for range 2 {
		go func() {
			n := 0
			for {
				select {
				case <-done:
					probed <- n
					return
				default:
				}
				c.g.Observe()
				n++
			}
		}()
	}
	p := startPyUpdater(t, "rounds", lock, strconv.Itoa(rounds))
	failed := p.line(t)
	close(done)
	n := <-probed + <-probed
	assert.Equal(t, "0", failed, "tries of the updater that gave up, against %d probes", n)
	assert.Greater(t, n, rounds, "the guards probed throughout")
}

// A stale answer names the install directories of the checkout the
// configured path leads to now: a deploy that flips a link to one clone,
// then to another, is seen in the 409's install roots and recovery
// markers at each step, on every path, as a resolution of the path at the
// check would find them.
func TestStaleAnswerFollowsTheFlippedLink(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			tmp := tempDir(t)
			clones := []string{filepath.Join(tmp, "a"), filepath.Join(tmp, "b"), filepath.Join(tmp, "c")}
			for i, dir := range clones {
				agentRepo(t, dir)
				if i > 0 {
					commit(t, dir, "run_agent.py", "class AIAgent: clone = "+string(rune('a'+i))+"\n")
				}
			}
			current := filepath.Join(tmp, "current")
			flip := func(to string) {
				require.NoError(t, os.Symlink(to, current+".new"))
				require.NoError(t, os.Rename(current+".new", current))
			}
			flip(clones[0])
			g := bindFast(t, filepath.Join(current, "run_agent.py"), mode.env(t))
			for _, dir := range clones[1:] {
				flip(dir)
				writeFile(t, filepath.Join(dir, hermesIncomplete), "")
				for i := 0; i < 3; i++ {
					var se *StaleError
					require.True(t, errors.As(g.EnsureCurrent(), &se), "a check after the flip to %s", dir)
					assert.Equal(t, UpdateIncomplete, se.State)
					o := g.observe(g.config(), g.bound.Load())
					assert.Contains(t, o.InstallRoots, resolved(t, dir))
					assert.Equal(t, []string{filepath.Join(resolved(t, dir), hermesIncomplete)}, o.RecoveryMarkers)
				}
				require.NoError(t, os.Remove(filepath.Join(dir, hermesIncomplete)))
			}
		})
	}
}

// Guard.Observe reads the updater's files now, as a stale check does:
// right after a deploy flipped the link, before any check read the
// checkout again, it names the install directory the link leads to now,
// and that directory's recovery markers.
func TestObserveFollowsTheFlippedLink(t *testing.T) {
	tmp := tempDir(t)
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	agentRepo(t, a)
	agentRepo(t, b)
	current := filepath.Join(tmp, "current")
	flip := func(to string) {
		require.NoError(t, os.Symlink(to, current+".new"))
		require.NoError(t, os.Rename(current+".new", current))
	}
	flip(a)
	g := bindFast(t, filepath.Join(current, "run_agent.py"), statEnv())
	flip(b)
	writeFile(t, filepath.Join(b, hermesIncomplete), "")
	o := g.Observe()
	assert.Contains(t, o.InstallRoots, resolved(t, b))
	assert.Equal(t, []string{filepath.Join(resolved(t, b), hermesIncomplete)}, o.RecoveryMarkers)
	assert.Equal(t, UpdateIncomplete, o.State)
}

// After a deploy flipped the link, each check reads the checkout again
// (its configured path leads to another module file than the bound one),
// yet the stale answers of one window of staleReuse still share one read
// of the updater's files: the install directories are the same.
func TestStaleAnswersShareAReadAfterAFlip(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			tmp := tempDir(t)
			a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
			agentRepo(t, a)
			agentRepo(t, b)
			commit(t, b, "run_agent.py", "class AIAgent: clone = 2\n")
			current := filepath.Join(tmp, "current")
			flip := func(to string) {
				require.NoError(t, os.Symlink(to, current+".new"))
				require.NoError(t, os.Rename(current+".new", current))
			}
			flip(a)
			g := bindFast(t, filepath.Join(current, "run_agent.py"), mode.env(t))
			flip(b)
			bd := g.bound.Load()
			for tries := 0; ; tries++ {
				time.Sleep(staleReuse)
				start := time.Now()
				answers := map[*answeredRead]bool{}
				n := 0
				for ; n < 20 && time.Since(start) < staleReuse/2; n++ {
					var se *StaleError
					require.ErrorAs(t, g.EnsureCurrent(), &se)
					answers[bd.answered.Load()] = true
				}
				if time.Since(start) >= staleReuse && tries < 20 || n < 2 {
					require.Less(t, tries, 20, "two stale checks never took less than %v", staleReuse/2)
					continue // the machine paused: again
				}
				assert.Len(t, answers, 1, "reads of the updater's files by %d stale answers", n)
				break
			}
		})
	}
}

// The same checkout updated under another name, a bind mount of it (as a
// container's volume is): its newer failure receipt is this checkout's,
// and refuses the plan the older success would make.
func TestReceiptOfTheSameCheckoutUnderABindMount(t *testing.T) {
	c := newReloadCase(t)
	alias := filepath.Join(tempDir(t), "alias")
	require.NoError(t, os.Mkdir(alias, 0o755))
	if out, err := gittest.Mount(t, "--bind", c.dir, alias); err != nil {
		t.Skipf("no bind mount here (Linux, as root): %v: %s", err, out)
	}
	updateUnder(t, c.home, c.dir, c.dir, "true")
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err, "the success proves")
	r.Release()
	res := updateUnder(t, c.home, alias, alias, "false")
	require.NotEmpty(t, res.Failure)
	_, err = c.g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady, "the newest update of this checkout failed")
	assert.ErrorContains(t, err, `"failed"`)
}
