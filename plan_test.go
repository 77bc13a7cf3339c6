package runtimeguard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// reloadCase is a guard bound to a checkout that has since moved one
// commit, with a home whose layout has a receipt and a lock file.
type reloadCase struct {
	dir, home, module string
	loaded, moved     string
	layout            Layout
	g                 *Guard
}

func newReloadCase(t *testing.T) *reloadCase {
	t.Helper()
	return newReloadCaseWith(t, nil)
}

// newReloadCaseWith is newReloadCase with its layout changed by edit.
func newReloadCaseWith(t *testing.T, edit func(*Layout)) *reloadCase {
	t.Helper()
	tmp := tempDir(t)
	c := &reloadCase{dir: filepath.Join(tmp, "home", "hermes-agent"), home: filepath.Join(tmp, "home")}
	c.module, c.loaded = agentRepo(t, c.dir)
	require.NoError(t, os.MkdirAll(c.home, 0o755))
	c.layout = HermesLayout
	c.layout.Lock = "update.lock"
	if edit != nil {
		edit(&c.layout)
	}
	var err error
	c.g, err = New(Options{ModulePath: c.module, HomeDir: c.home, Layout: c.layout})
	require.NoError(t, err)
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	return c
}

// receipt is a receipt's JSON.
func receipt(outcome, pre, post string, finished time.Time) string {
	return fmt.Sprintf(`{"schema": 1, "update_id": "u-%d", "outcome": %q, "started_at": %q, "finished_at": %q, "pre_update": {"sha": %q}, "post_update": {"sha": %q}}`,
		finished.UnixNano(), outcome, finished.Add(-time.Second).UTC().Format(time.RFC3339Nano), finished.UTC().Format(time.RFC3339Nano), pre, post)
}

func (c *reloadCase) receiptPath() string {
	return filepath.Join(c.home, filepath.FromSlash(HermesLayout.Receipt))
}

// writeReceipt writes the latest receipt.
func (c *reloadCase) writeReceipt(t *testing.T, body string) {
	t.Helper()
	writeFile(t, c.receiptPath(), body)
}

// success writes the receipt of a successful update to HEAD now.
func (c *reloadCase) success(t *testing.T) {
	t.Helper()
	c.writeReceipt(t, receipt("success", c.loaded, c.moved, time.Now()))
}

func TestPlanReloadConditions(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, c *reloadCase)
		why   string // "" for a plan
	}{
		{"success at HEAD, finished after binding", func(t *testing.T, c *reloadCase) { c.success(t) }, ""},
		{"failed", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, receipt("failed", c.loaded, c.moved, time.Now()))
		}, `outcome is "failed"`},
		{"partial", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, receipt("partial", c.loaded, c.moved, time.Now()))
		}, `outcome is "partial"`},
		{"refused", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, receipt("refused", c.loaded, c.moved, time.Now()))
		}, `outcome is "refused"`},
		{"running", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, fmt.Sprintf(`{"schema":1,"update_id":"u","outcome":"running","started_at":%q,"pre_update":{"sha":%q}}`, time.Now().UTC().Format(time.RFC3339), c.loaded))
		}, `says the update is running`},
		{"another revision", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, receipt("success", c.loaded, strings.Repeat("b", 40), time.Now()))
		}, "is for revision"},
		{"finished before binding", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, receipt("success", c.loaded, c.moved, time.Now().Add(-time.Hour)))
		}, "not after the guard bound"},
		{"finished in the future", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, receipt("success", c.loaded, c.moved, time.Now().Add(time.Hour)))
		}, "in the future"},
		{"a live marker", func(t *testing.T, c *reloadCase) {
			c.success(t)
			gittest.WriteMarker(t, filepath.Join(c.home, hermesMarker), os.Getpid(), time.Now())
		}, "the update marker"},
		{"a stale marker", func(t *testing.T, c *reloadCase) {
			c.success(t)
			gittest.WriteMarker(t, filepath.Join(c.home, hermesMarker), gittest.ExitedPID(t, processGone), time.Now())
		}, "is stale"},
		{"a recovery marker", func(t *testing.T, c *reloadCase) {
			c.success(t)
			writeFile(t, filepath.Join(c.dir, hermesIncomplete), "")
		}, "recovery marker"},
		{"no receipt", func(t *testing.T, c *reloadCase) {}, "no receipt was written since the guard bound"},
		{"a receipt that is a link", func(t *testing.T, c *reloadCase) {
			target := filepath.Join(c.home, "elsewhere.json")
			writeFile(t, target, receipt("success", c.loaded, c.moved, time.Now()))
			require.NoError(t, os.MkdirAll(filepath.Dir(c.receiptPath()), 0o755))
			if err := os.Symlink(target, c.receiptPath()); err != nil {
				t.Skipf("cannot make a symbolic link here: %v", err)
			}
		}, "not usable"},
		{"a receipt over the cap", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, receipt("success", c.loaded, c.moved, time.Now())+strings.Repeat(" ", updater.MaxReceiptBytes))
		}, "not usable"},
		{"a receipt that is not JSON", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, "success\n")
		}, "not usable"},
		{"a receipt of an unknown schema", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, strings.Replace(receipt("success", c.loaded, c.moved, time.Now()), `"schema": 1`, `"schema": 2`, 1))
		}, "unknown receipt schema"},
		{"not stale", func(t *testing.T, c *reloadCase) {
			git(t, c.dir, "reset", "-q", "--hard", c.loaded)
			c.writeReceipt(t, receipt("success", c.moved, c.loaded, time.Now()))
		}, "not stale"},
		{"an updater holds the lock", func(t *testing.T, c *reloadCase) {
			c.success(t)
			f, err := updater.Lock("", filepath.Join(c.home, "update.lock"), true)
			require.NoError(t, err)
			t.Cleanup(func() { f.Close() })
		}, "holds the lock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newReloadCase(t)
			tc.setup(t, c)
			r, err := c.g.PlanReload(context.Background())
			if tc.why == "" {
				require.NoError(t, err)
				assert.Equal(t, c.loaded, r.From)
				assert.Equal(t, c.moved, r.To)
				assert.Equal(t, c.moved, r.Receipt.To)
				assert.Equal(t, c.g.Identity().ModulePath, r.Identity.ModulePath)
				r.Release()
				return
			}
			assert.ErrorIs(t, err, ErrNotReady)
			assert.ErrorContains(t, err, tc.why)
			assert.Nil(t, r)
			// A plan that is not made holds no lock. (A child that a
			// parallel test forks holds copies of this process's files
			// until it execs: the lock may be held for that instant.)
			if tc.name != "an updater holds the lock" {
				require.Eventually(t, func() bool {
					f, err := updater.Lock("", filepath.Join(c.home, "update.lock"), true)
					if err == nil {
						f.Close()
					}
					return err == nil
				}, 10*time.Second, time.Millisecond, "the lock after a refused plan")
			}
		})
	}
}

// The plan holds the lock shared until the new code is bound; Plan.Bind binds
// to the plan's revision, and the guard is current and its payloads are
// exactly as before.
func TestPlanBindAfterPlan(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	changed := c.g.Changed()
	require.ErrorIs(t, c.g.EnsureCurrent(), ErrStale)
	select {
	case <-changed:
	default:
		t.Fatal("Changed did not fire on a stale check")
	}

	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	lock := filepath.Join(c.home, "update.lock")
	_, err = updater.Lock("", lock, true)
	require.ErrorIs(t, err, updater.ErrLocked, "an updater's lock while a plan holds it")

	require.NoError(t, r.Schedule())
	var se *StaleError
	require.ErrorAs(t, c.g.EnsureCurrent(), &se)
	p := se.Payload()
	assert.True(t, p.RestartScheduled)
	assert.Contains(t, p.Error, "retry shortly")
	assert.NotContains(t, strings.ToLower(p.Error), "success")
	assert.True(t, se.Problem().RestartScheduled)

	require.NoError(t, r.Bind(context.Background()))
	assert.Equal(t, c.moved, c.g.Identity().Revision)
	assert.NoError(t, c.g.EnsureCurrent())
	require.Eventually(t, func() bool {
		f, err := updater.Lock("", lock, true)
		if err == nil {
			f.Close()
		}
		return err == nil
	}, 10*time.Second, time.Millisecond, "the lock once the new code is bound")

	// The new binding has a new Changed channel, and a new move gives
	// today's payload: nothing is scheduled.
	changed = c.g.Changed()
	select {
	case <-changed:
		t.Fatal("the new binding's Changed fired before any move")
	default:
	}
	commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 3\n")
	require.ErrorAs(t, c.g.EnsureCurrent(), &se)
	assert.Equal(t, Payload{Error: defaultMessage, Type: PayloadType, Retryable: true, AgentUpdateState: UpdateUnverified}, se.Payload())
	<-changed
}

// HEAD moving again after the plan: Plan.Bind fails, the guard stays stale on
// the old revision, and the payload is no longer scheduled.
func TestPlanBindAfterHEADMovedAgain(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	require.NoError(t, r.Schedule())
	third := commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 3\n")
	err = r.Bind(context.Background())
	assert.ErrorIs(t, err, ErrStale)
	assert.ErrorContains(t, err, third)
	assert.Equal(t, 1, strings.Count(err.Error(), "runtimeguard:"), "prefixed once: %v", err)
	assert.Equal(t, c.loaded, c.g.Identity().Revision)
	var se *StaleError
	require.ErrorAs(t, c.g.EnsureCurrent(), &se)
	assert.False(t, se.RestartScheduled)
	assert.Equal(t, defaultMessage, se.Message)
	assert.Error(t, r.Bind(context.Background()), "a plan rebinds once")
}

// One plan of a guard is scheduled at a time: a second plan is not made
// while one is, and one released or carried out cannot be scheduled.
func TestOneScheduledPlanAtATime(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	p1, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	p2, err := c.g.PlanReload(context.Background())
	require.NoError(t, err, "two plans before either is scheduled")
	require.NoError(t, p1.Schedule())
	require.NoError(t, p1.Schedule(), "scheduling again is no error")
	assert.ErrorContains(t, p2.Schedule(), "another reload")
	p2.Release()
	_, err = c.g.PlanReload(context.Background())
	assert.ErrorIs(t, err, ErrNotReady)
	assert.ErrorContains(t, err, "scheduled already")
	require.NoError(t, p1.Bind(context.Background()))
	assert.Error(t, p1.Schedule(), "a plan carried out")
}

// twoPlansOfOneReceipt makes two plans of one success receipt, the first
// scheduled.
func twoPlansOfOneReceipt(t *testing.T) (c *reloadCase, p1, p2 *Plan) {
	t.Helper()
	c = newReloadCase(t)
	c.success(t)
	p1, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	p2, err = c.g.PlanReload(context.Background())
	require.NoError(t, err)
	t.Cleanup(p2.Release)
	require.NoError(t, p1.Schedule())
	return c, p1, p2
}

// A receipt carries at most one reload, and a plan's life is its own: a
// plan made beside one that was carried out cannot be scheduled (the
// guard was bound anew), nor can one whose receipt an abandoned plan
// spent; neither keeps a later update's reload from being planned.
func TestPlanLifeIsItsOwn(t *testing.T) {
	t.Run("made on a binding the guard no longer has", func(t *testing.T) {
		c, p1, p2 := twoPlansOfOneReceipt(t)
		require.NoError(t, p1.Bind(context.Background()))
		assert.ErrorContains(t, p2.Schedule(), "bound anew", "a second reload on one receipt")
		assert.NoError(t, c.g.EnsureCurrent())

		third := commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 3\n")
		c.writeReceipt(t, receipt("success", c.moved, third, time.Now()))
		require.ErrorIs(t, c.g.EnsureCurrent(), ErrStale)
		p3, err := c.g.PlanReload(context.Background())
		require.NoError(t, err, "a later update's reload")
		defer p3.Release()
		require.NoError(t, p3.Schedule())
		var se *StaleError
		require.ErrorAs(t, c.g.EnsureCurrent(), &se)
		assert.True(t, se.RestartScheduled)
	})
	t.Run("on a receipt an abandoned plan spent", func(t *testing.T) {
		c, p1, p2 := twoPlansOfOneReceipt(t)
		p1.Release() // abandoned after it began
		assert.ErrorContains(t, p2.Schedule(), "already scheduled on the receipt")
		var se *StaleError
		require.ErrorAs(t, c.g.EnsureCurrent(), &se)
		assert.False(t, se.RestartScheduled, "no reload is scheduled")
		_, err := c.g.PlanReload(context.Background())
		assert.ErrorContains(t, err, "already scheduled on the receipt")
	})
	t.Run("a correlation_id used again for another update", func(t *testing.T) {
		c := newReloadCase(t)
		c.writeReceipt(t, correlated("corr-1", c.loaded, c.moved, time.Now()))
		p1, err := c.g.PlanReload(context.Background())
		require.NoError(t, err)
		require.NoError(t, p1.Schedule())
		p1.Release() // abandoned: the receipt is spent

		third := commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 3\n")
		c.writeReceipt(t, correlated("corr-1", c.moved, third, time.Now()))
		p2, err := c.g.PlanReload(context.Background())
		require.NoError(t, err, "another update, whatever its correlation_id")
		defer p2.Release()
		assert.NotEqual(t, p1.Receipt.ID, p2.Receipt.ID)
		assert.NoError(t, p2.Schedule())
	})
}

// correlated is a receipt of Hermes's third writer: a correlation_id, no
// update_id.
func correlated(id, pre, post string, finished time.Time) string {
	return fmt.Sprintf(`{"schema": 1, "correlation_id": %q, "outcome": "success", "started_at": %q, "finished_at": %q, "pre_update": {"sha": %q}, "post_update": {"sha": %q}}`,
		id, finished.Add(-time.Second).UTC().Format(time.RFC3339Nano), finished.UTC().Format(time.RFC3339Nano), pre, post)
}

// Released plans give today's payload back, exactly.
// Without a lock file, an update may begin between the plan and the
// binding of the new code: Plan.Bind reads the updater's files again, and a
// marker, a recovery marker or another receipt keeps the guard stale.
func TestPlanBindRefusesAnUpdateBegunSinceThePlan(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, c *reloadCase)
	}{
		{"a live marker", func(t *testing.T, c *reloadCase) {
			gittest.WriteMarker(t, filepath.Join(c.home, hermesMarker), os.Getpid(), time.Now())
		}},
		{"a recovery marker", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(c.dir, hermesIncomplete), "")
		}},
		{"a failed receipt", func(t *testing.T, c *reloadCase) {
			c.writeReceipt(t, receipt("failed", c.moved, c.moved, time.Now()))
		}},
		{"no receipt", func(t *testing.T, c *reloadCase) { require.NoError(t, os.Remove(c.receiptPath())) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newReloadCase(t)
			c.success(t)
			r, err := c.g.PlanReload(context.Background())
			require.NoError(t, err)
			require.NoError(t, r.Schedule())
			tc.change(t, c)
			err = r.Bind(context.Background())
			require.ErrorIs(t, err, ErrNotReady)
			assert.Equal(t, 1, strings.Count(err.Error(), "runtimeguard:"), "prefixed once: %v", err)
			assert.Equal(t, c.loaded, c.g.Identity().Revision, "still bound to the old code")
			var se *StaleError
			require.ErrorAs(t, c.g.EnsureCurrent(), &se)
			assert.False(t, se.RestartScheduled, "the plan is done")
		})
	}
}

// A nil plan, what a failed PlanReload returns, is safe to release and
// cannot be scheduled or bound.
func TestNilPlan(t *testing.T) {
	c := newReloadCase(t)
	r, err := c.g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	require.Nil(t, r)
	defer r.Release()
	r.Release()
	assert.Nil(t, r.LockFile())
	assert.Error(t, r.Schedule())
	assert.Error(t, r.Bind(context.Background()))
}

func TestReleasedPlanRestoresThePayload(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	var before *StaleError
	require.ErrorAs(t, c.g.EnsureCurrent(), &before)
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	require.NoError(t, r.Schedule())
	r.Release()
	r.Release()
	var after *StaleError
	require.ErrorAs(t, c.g.EnsureCurrent(), &after)
	b1, _ := json.Marshal(before.Payload())
	b2, _ := json.Marshal(after.Payload())
	assert.Equal(t, string(b1), string(b2))
}

// HEAD flipping back and forth gives at most one reload per receipt.
func TestNoReloadStorm(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	reloads := 0
	for i := 0; i < 6; i++ {
		target := c.moved
		if i%2 == 1 {
			target = c.loaded
		}
		git(t, c.dir, "reset", "-q", "--hard", target)
		r, err := c.g.PlanReload(context.Background())
		if err != nil {
			require.ErrorIs(t, err, ErrNotReady)
			continue
		}
		require.NoError(t, r.Schedule())
		if r.Bind(context.Background()) == nil {
			reloads++
		}
	}
	assert.Equal(t, 1, reloads)

	// A plan that was scheduled but not carried out spends its receipt too.
	d := newReloadCase(t)
	d.success(t)
	r, err := d.g.PlanReload(context.Background())
	require.NoError(t, err)
	require.NoError(t, r.Schedule())
	r.Release()
	_, err = d.g.PlanReload(context.Background())
	assert.ErrorIs(t, err, ErrNotReady)
	assert.ErrorContains(t, err, "already scheduled")
}

// countingWriter counts the lines a logger writes.
type countingWriter struct{ h *recordHandler }

func (w countingWriter) Write(p []byte) (int, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	w.h.lines += strings.Count(string(p), "\n")
	return len(p), nil
}

// A Plan that Guard.PlanReload did not make (a nil one, the zero Plan)
// answers every method with an error or nothing, never a panic.
func TestPlanNotMadeByPlanReload(t *testing.T) {
	for name, p := range map[string]*Plan{"nil": nil, "zero": new(Plan)} {
		t.Run(name, func(t *testing.T) {
			assert.NotPanics(t, p.Release)
			assert.Nil(t, p.LockFile())
			assert.NotPanics(t, func() {
				assert.Error(t, p.Schedule())
			})
			assert.NotPanics(t, func() {
				assert.ErrorContains(t, p.Bind(context.Background()), "not made by Guard.PlanReload")
			})
			assert.NotPanics(t, p.Release)
		})
	}
}

// A plan binds once: Bind after Bind or after Release is an error that
// leaves the guard as it was, and Schedule then is refused.
func TestPlanBindsOnce(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	require.ErrorIs(t, c.g.EnsureCurrent(), ErrStale)
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	require.NoError(t, r.Bind(context.Background()))
	assert.Equal(t, c.moved, c.g.Identity().Revision)
	assert.ErrorContains(t, r.Bind(context.Background()), "released or carried out")
	assert.Error(t, r.Schedule())
	assert.Equal(t, c.moved, c.g.Identity().Revision)
	assert.NoError(t, c.g.EnsureCurrent())

	c2 := newReloadCase(t)
	c2.success(t)
	r, err = c2.g.PlanReload(context.Background())
	require.NoError(t, err)
	r.Release()
	assert.ErrorContains(t, r.Bind(context.Background()), "released or carried out")
	assert.Equal(t, c2.loaded, c2.g.Identity().Revision)
	assert.ErrorIs(t, c2.g.EnsureCurrent(), ErrStale)
}

// twoClones are two clones of one upstream that share one updater's
// home, each with a guard, and upstream one commit ahead of both.
type twoClones struct {
	home, a, b    string
	ga, gb        *Guard
	loaded, ahead string
	moduleA, modB string
}

func newTwoClones(t *testing.T, home string) *twoClones {
	t.Helper()
	tmp := tempDir(t)
	upstream := filepath.Join(tmp, "upstream")
	c := &twoClones{home: home, a: filepath.Join(tmp, "a"), b: filepath.Join(tmp, "b")}
	_, c.loaded = agentRepo(t, upstream)
	git(t, tmp, "clone", "-q", upstream, c.a)
	git(t, tmp, "clone", "-q", upstream, c.b)
	c.ahead = commit(t, upstream, "run_agent.py", "class AIAgent: revision = 2\n")
	c.moduleA, c.modB = filepath.Join(c.a, "run_agent.py"), filepath.Join(c.b, "run_agent.py")
	var err error
	c.ga, err = New(Options{ModulePath: c.moduleA, HomeDir: home})
	require.NoError(t, err)
	t.Cleanup(func() { c.ga.Close() })
	c.gb, err = New(Options{ModulePath: c.modB, HomeDir: home})
	require.NoError(t, err)
	t.Cleanup(func() { c.gb.Close() })
	return c
}

// updateA updates clone a under the update protocol (git pull), as
// runtimeguard update does: its receipts name the checkout.
func (c *twoClones) updateA(t *testing.T) {
	t.Helper()
	res := updateUnder(t, c.home, c.a, resolved(t, c.a), "git", "pull", "-q", "--ff-only")
	require.Empty(t, res.Failure)
}

// updateUnder runs argv in the checkout dir under the update protocol, as
// runtimeguard update does, with the updater's files in home: its
// receipts name the checkout as checkout (the top level, by any name).
func updateUnder(t *testing.T, home, dir, checkout string, argv ...string) updater.Result {
	t.Helper()
	var out bytes.Buffer
	res, err := updater.System.Run(context.Background(), updater.Update{
		Home: home, Marker: filepath.Join(home, hermesMarker), Receipt: filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)),
		CheckoutLock: filepath.Join(dir, ".git", HermesLayout.CheckoutLock),
		Judge:        updater.System.Judge(DefaultMaxMarkerAge),
		Argv:         argv, Dir: dir, Env: gittest.Env, Stdout: &out, Stderr: &out,
		Inspect: func() (string, string, string, error) { return git(t, dir, "rev-parse", "HEAD"), "", checkout, nil },
	})
	require.NoError(t, err, out.String())
	return res
}

// A receipt names its checkout by what identifies the directory, not by
// the path's text: the same checkout's receipt under another name (a
// ".." in it, as a bind mount or a case-insensitive file system give
// others) is its own, and a newer failure there refuses the plan an older
// success would make; another clone renamed into the path a receipt names
// is not the checkout the receipt updated.
func TestReceiptNamesItsCheckoutByIdentity(t *testing.T) {
	t.Run("a failure of the same checkout under another name", func(t *testing.T) {
		c := newReloadCase(t)
		updateUnder(t, c.home, c.dir, c.dir, "true")
		r, err := c.g.PlanReload(context.Background())
		require.NoError(t, err, "the success proves")
		r.Release()
		require.NoError(t, os.Mkdir(filepath.Join(c.home, "alias"), 0o755))
		sep := string(filepath.Separator)
		alias := c.home + sep + "alias" + sep + ".." + sep + "hermes-agent" // not cleaned
		res := updateUnder(t, c.home, c.dir, alias, "false")
		require.NotEmpty(t, res.Failure)
		_, err = c.g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady, "the newest update of this checkout failed")
		assert.ErrorContains(t, err, `"failed"`)
	})
	t.Run("another clone renamed into the receipt's path", func(t *testing.T) {
		tmp := tempDir(t)
		home := filepath.Join(tmp, "home")
		require.NoError(t, os.Mkdir(home, 0o755))
		upstream := filepath.Join(tmp, "upstream")
		agentRepo(t, upstream)
		p1, other := filepath.Join(tmp, "srv", "agent"), filepath.Join(tmp, "srv", "agent-next")
		git(t, tmp, "clone", "-q", upstream, p1)
		git(t, tmp, "clone", "-q", upstream, other)
		g, err := New(Options{ModulePath: filepath.Join(p1, "run_agent.py"), HomeDir: home})
		require.NoError(t, err)
		defer g.Close()
		commit(t, upstream, "run_agent.py", "class AIAgent: revision = 2\n")
		updateUnder(t, home, p1, resolved(t, p1), "git", "pull", "-q", "--ff-only")
		git(t, other, "pull", "-q", "--ff-only") // a plain pull: nothing proves it
		require.NoError(t, os.Rename(p1, p1+".old"))
		require.NoError(t, os.Rename(other, p1))
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		_, err = g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady, "the receipt of the checkout renamed away proves nothing of the one renamed in")
		assert.False(t, isPending(err), "no proof will come: %v", err)
	})
}

// A receipt proves only an update of the checkout the guard is bound to.
// Two clones share a home; b moves by a plain git pull, which nothing
// proves, then a is updated under the protocol to the same revision: a's
// receipt names a, reloads a, and is no proof for b, whose 409 stays the
// manual one. A receipt that names no checkout (Hermes's writer's) proves
// a reload only of <home>/hermes-agent, where Hermes's installer puts its
// checkout, by the directory's identity: not of another clone in the home
// or outside it, nor of any under a layout that names no such checkout.
func TestReceiptOfAnotherCheckout(t *testing.T) {
	t.Run("a receipt that names the other clone", func(t *testing.T) {
		c := newTwoClones(t, tempDir(t))
		git(t, c.b, "pull", "-q", "--ff-only")
		require.ErrorIs(t, c.gb.EnsureCurrent(), ErrStale)
		c.updateA(t)
		require.ErrorIs(t, c.ga.EnsureCurrent(), ErrStale)
		ra, err := c.ga.PlanReload(context.Background())
		require.NoError(t, err, "a's own receipt")
		assert.Equal(t, resolved(t, c.a), ra.Receipt.Checkout)
		ra.Release()

		_, err = c.gb.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.False(t, isPending(err), "no proof will come for b: %v", err)
		assert.ErrorContains(t, err, "nothing proves this move")
		assert.Nil(t, c.gb.Observe().Receipt, "b sees no receipt of its own")
	})
	t.Run("b's own receipt, older than the other clone's", func(t *testing.T) {
		c := newTwoClones(t, tempDir(t))
		c.a, c.b = c.b, c.a // update b first, under the protocol
		c.updateA(t)
		c.a, c.b = c.b, c.a
		c.updateA(t) // then a: its receipt is the latest
		require.ErrorIs(t, c.gb.EnsureCurrent(), ErrStale)
		rb, err := c.gb.PlanReload(context.Background())
		require.NoError(t, err, "b's receipt, retained beside a's latest")
		assert.Equal(t, resolved(t, c.b), rb.Receipt.Checkout)
		rb.Release()
	})
	t.Run("a receipt that names no checkout, the checkouts outside the home", func(t *testing.T) {
		c := newTwoClones(t, tempDir(t))
		git(t, c.b, "pull", "-q", "--ff-only")
		writeFile(t, filepath.Join(c.home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", c.loaded, c.ahead, time.Now()))
		require.ErrorIs(t, c.gb.EnsureCurrent(), ErrStale)
		_, err := c.gb.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.False(t, isPending(err), "no proof will come: %v", err)
		assert.ErrorContains(t, err, "names no checkout")
	})
	t.Run("a receipt that names no checkout, the checkout inside the home", func(t *testing.T) {
		c := newReloadCase(t) // the checkout at <home>/hermes-agent, as Hermes's installer puts it
		writeFile(t, filepath.Join(c.home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", c.loaded, c.moved, time.Now()))
		r, err := c.g.PlanReload(context.Background())
		require.NoError(t, err)
		r.Release()
	})
	t.Run("a receipt that names no checkout, another clone inside the home", func(t *testing.T) {
		home := tempDir(t)
		c := newTwoClones(t, home)
		a, b := filepath.Join(home, "hermes-agent"), filepath.Join(home, "hermes-agent-dev")
		require.NoError(t, os.Rename(c.a, a))
		require.NoError(t, os.Rename(c.b, b))
		gb, err := New(Options{ModulePath: filepath.Join(b, "run_agent.py"), HomeDir: home})
		require.NoError(t, err)
		defer gb.Close()
		git(t, b, "pull", "-q", "--ff-only") // a plain pull: nothing proves it
		git(t, a, "pull", "-q", "--ff-only") // Hermes's own update of its checkout
		writeFile(t, filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", c.loaded, c.ahead, time.Now()))
		require.ErrorIs(t, gb.EnsureCurrent(), ErrStale)
		_, err = gb.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady, "the receipt of the home's checkout is no proof for another clone in the home")
		assert.False(t, isPending(err), "no proof will come: %v", err)
		assert.ErrorContains(t, err, "names no checkout")
	})
	t.Run("a receipt that names no checkout, the home's checkout through a link", func(t *testing.T) {
		c := newTwoClones(t, tempDir(t))
		require.NoError(t, os.Symlink(c.a, filepath.Join(c.home, "hermes-agent"))) // the same directory
		git(t, c.a, "pull", "-q", "--ff-only")
		writeFile(t, filepath.Join(c.home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", c.loaded, c.ahead, time.Now()))
		require.ErrorIs(t, c.ga.EnsureCurrent(), ErrStale)
		r, err := c.ga.PlanReload(context.Background())
		require.NoError(t, err, "the checkout the home installs, by its identity")
		r.Release()
	})
	t.Run("a receipt that names no checkout, a layout that names no installed checkout", func(t *testing.T) {
		c := newReloadCaseWith(t, func(l *Layout) { l.Checkout = "" })
		c.success(t)
		_, err := c.g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady)
		assert.False(t, isPending(err), "no proof will come: %v", err)
		assert.ErrorContains(t, err, "names no checkout")
	})
	// A profile whose home holds an install of its own (Hermes's installer
	// puts it in $HERMES_HOME/hermes-agent, the profile's home): a receipt
	// naming no checkout in that home is that install's, not the root's.
	t.Run("a receipt that names no checkout, in a profile home with an install of its own", func(t *testing.T) {
		root := filepath.Join(tempDir(t), "root")
		installed := filepath.Join(root, "hermes-agent")
		module, _ := agentRepo(t, installed)
		profile := filepath.Join(root, "profiles", "dev")
		require.NoError(t, os.MkdirAll(profile, 0o755))
		git(t, profile, "clone", "-q", installed, "hermes-agent")
		g, err := New(Options{ModulePath: module, HomeDir: root})
		require.NoError(t, err)
		defer g.Close()
		moved := gittest.Commit(t, installed, "run_agent.py", "class AIAgent: revision = 2\n") // a plain pull: nothing proves it
		git(t, filepath.Join(profile, "hermes-agent"), "pull", "-q")                           // the profile's install, updated
		writeFile(t, filepath.Join(receiptsDir(profile), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", moved, time.Now())))
		_, err = g.PlanReload(context.Background())
		require.ErrorIs(t, err, ErrNotReady, "the profile's own install's receipt is no proof for the root's")
		assert.False(t, isPending(err), "no proof will come: %v", err)
		assert.ErrorContains(t, err, filepath.Join(profile, "hermes-agent"))
	})
	t.Run("a receipt that names no checkout, in a profile home, of the profile's own install", func(t *testing.T) {
		profile := filepath.Join(tempDir(t), "root", "profiles", "dev")
		installed := filepath.Join(profile, "hermes-agent")
		module, _ := agentRepo(t, installed)
		g, err := New(Options{ModulePath: module, HomeDir: profile})
		require.NoError(t, err)
		defer g.Close()
		moved := gittest.Commit(t, installed, "run_agent.py", "class AIAgent: revision = 2\n")
		writeFile(t, filepath.Join(receiptsDir(profile), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", moved, time.Now())))
		r, err := g.PlanReload(context.Background())
		require.NoError(t, err, "the install the profile's home holds, on its home's receipt")
		r.Release()
	})
	t.Run("a receipt that names no checkout, in a profile home without an install, of the shared one", func(t *testing.T) {
		root := filepath.Join(tempDir(t), "root")
		installed := filepath.Join(root, "hermes-agent")
		module, _ := agentRepo(t, installed)
		profile := filepath.Join(root, "profiles", "dev")
		require.NoError(t, os.MkdirAll(profile, 0o755))
		g, err := New(Options{ModulePath: module, HomeDir: root})
		require.NoError(t, err)
		defer g.Close()
		moved := gittest.Commit(t, installed, "run_agent.py", "class AIAgent: revision = 2\n") // hermes update run in the profile
		writeFile(t, filepath.Join(receiptsDir(profile), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", moved, time.Now())))
		r, err := g.PlanReload(context.Background())
		require.NoError(t, err, "the profiles share the root's install")
		r.Release()
	})
}

// Hermes's lock path below a regular file (the interpreter's install root
// holds a stray .git file whose gitdir names a file) names no lock anyone
// can hold: a plain pull is the manual 409, not an update that still runs.
func TestPlanReloadWithHermesLockBelowAFile(t *testing.T) {
	tmp := tempDir(t)
	home := filepath.Join(tmp, "home")
	dir := filepath.Join(home, "hermes-agent")
	module, _ := agentRepo(t, dir)
	root := filepath.Join(tmp, "root")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "venv", "bin"), 0o755))
	writeFile(t, filepath.Join(root, "README"), "x")
	writeFile(t, filepath.Join(root, ".git"), "gitdir: README\n")
	g, err := New(Options{ModulePath: module, HomeDir: home, Python: filepath.Join(root, "venv", "bin", "python")})
	require.NoError(t, err)
	defer g.Close()
	gittest.Commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n") // a plain pull
	o := g.Observe()
	assert.NotEqual(t, "held", o.CheckoutLock, "%s: %s", o.CheckoutLockPath, o.CheckoutLockReason)
	_, err = g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	assert.False(t, isPending(err), "nothing runs, and no proof will come: %v", err)
}

// newestWriterReceipt is a receipt as the newest generation of Hermes's writer
// finalizes it at the command's end: the third generation's, with an
// exit_code and a stop_reason, and the outcome given.
func newestWriterReceipt(t testing.TB, outcome, post string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(gittest.HermesReceipt(t, "gen3-correlation-success-latest.json", post, time.Now()), &m))
	m["outcome"], m["exit_code"], m["stop_reason"] = outcome, 0, "completed"
	if outcome != "success" {
		m["exit_code"], m["stop_reason"] = 130, "interrupted by the user"
	}
	data, err := json.Marshal(m)
	require.NoError(t, err)
	return string(data)
}

// receiptsDir is the Hermes receipts directory of a home.
func receiptsDir(home string) string { return filepath.Join(home, "logs", "update_receipts") }

// The receipts the Hermes updater writes, in every generation, prove a
// reload where they should and refuse it everywhere else: the updater as
// deployed, not only as the first generation wrote.
func TestPlanReloadHermesReceipts(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, c *reloadCase)
		why   string // "" for a plan
	}{
		{"gen1 update_id, latest and retained", func(t *testing.T, c *reloadCase) {
			data := gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())
			writeFile(t, filepath.Join(receiptsDir(c.home), "update_20261201_081337_11796_cbb7f64cc2e84a219879acf0c9b1f053.json"), string(data))
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(data))
		}, ""},
		{"gen1, 300 steps", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-300-steps-success.json", c.moved, time.Now())))
		}, ""},
		{"gen2, no id", func(t *testing.T, c *reloadCase) {
			data := gittest.HermesReceipt(t, "gen2-no-id-success.json", c.moved, time.Now())
			writeFile(t, filepath.Join(receiptsDir(c.home), "update_20261201_081340_12054.json"), string(data))
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(data))
		}, ""},
		{"gen3, correlation_id, copies that differ", func(t *testing.T, c *reloadCase) {
			at := time.Now()
			writeFile(t, filepath.Join(receiptsDir(c.home), "update_20261201_081340_12125_corr-123_x.json"), string(gittest.HermesReceipt(t, "gen3-correlation-success-retained.json", c.moved, at)))
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen3-correlation-success-latest.json", c.moved, at)))
		}, ""},
		{"gen1 failed", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-failed.json", c.moved, time.Now())))
		}, `outcome is "failed"`},
		{"a lost latest.json: a newer retained success", func(t *testing.T, c *reloadCase) {
			// latest.json is an older run's, written before the guard bound.
			writeFile(t, filepath.Join(receiptsDir(c.home), "update_20261201_090000_1.json"), string(gittest.HermesReceipt(t, "gen2-no-id-success.json", c.moved, time.Now())))
		}, ""},
		{"a newer retained failure, whatever latest.json says", func(t *testing.T, c *reloadCase) {
			now := time.Now()
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", c.moved, now.Add(-time.Second))))
			writeFile(t, filepath.Join(receiptsDir(c.home), "update_20261201_090001_2_x.json"), string(gittest.HermesReceipt(t, "gen1-update-id-failed.json", c.moved, now)))
		}, `outcome is "failed"`},
		{"the newest writer: exit_code and stop_reason", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), newestWriterReceipt(t, "success", c.moved))
		}, ""},
		{"the newest writer: interrupted", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), newestWriterReceipt(t, "interrupted", c.moved))
		}, `outcome is "interrupted"`},
		{"an outcome not yet known", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), newestWriterReceipt(t, "rolled_back", c.moved))
		}, `outcome is "rolled_back"`},
		{"another revision", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen3-correlation-success-latest.json", c.loaded, time.Now())))
		}, "is for revision"},
		{"a half-written latest.json", func(t *testing.T, c *reloadCase) {
			data := gittest.HermesReceipt(t, "gen2-no-id-success.json", c.moved, time.Now())
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(data[:len(data)/2]))
		}, "not usable"},
		{"a release in flight beside the marker", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen3-correlation-success-latest.json", c.moved, time.Now())))
			gittest.WriteMarker(t, filepath.Join(c.home, fmt.Sprintf("%s.cas-release-%d-0b7e", hermesMarker, os.Getpid())), os.Getpid(), time.Now())
		}, "releasing the marker"},
		{"a release whose process is gone", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(gittest.HermesReceipt(t, "gen3-correlation-success-latest.json", c.moved, time.Now())))
			gittest.WriteMarker(t, filepath.Join(c.home, fmt.Sprintf("%s.cas-release-%d-0b7e", hermesMarker, gittest.ExitedPID(t, processGone))), os.Getpid(), time.Now())
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newReloadCase(t)
			tc.setup(t, c)
			r, err := c.g.PlanReload(context.Background())
			if tc.why == "" {
				require.NoError(t, err)
				assert.Equal(t, c.moved, r.To)
				assert.NotEmpty(t, r.Receipt.ID)
				r.Release()
				return
			}
			assert.ErrorIs(t, err, ErrNotReady)
			assert.ErrorContains(t, err, tc.why)
		})
	}
}

// A receipt already on disk when the guard bound proves nothing, whatever
// time it claims: here one that claims to finish seconds after binding,
// for the revision a move by hand then checks out.
func TestPlanReloadReceiptFromBeforeBinding(t *testing.T) {
	tmp := tempDir(t)
	dir, home := filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
	module, loaded := agentRepo(t, dir)
	moved := commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n")
	git(t, dir, "reset", "-q", "--hard", loaded)
	bound := time.Now()
	writeFile(t, filepath.Join(receiptsDir(home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", moved, bound.Add(3*time.Second))))

	e := *systemEnv
	var mu sync.Mutex
	clock := bound
	e.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	g, err := newGuard(Options{ModulePath: module, HomeDir: home}, &e)
	require.NoError(t, err)
	git(t, dir, "reset", "-q", "--hard", moved) // a move by hand
	mu.Lock()
	clock = bound.Add(time.Minute) // the receipt's time has passed
	mu.Unlock()
	_, err = g.PlanReload(context.Background())
	assert.ErrorIs(t, err, ErrNotReady)
	assert.ErrorContains(t, err, "no receipt was written since the guard bound")

	// The same receipt written again after binding proves it.
	writeFile(t, filepath.Join(receiptsDir(home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", moved, bound.Add(3*time.Second))))
	r, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	r.Release()
}

// Hermes's updater keeps the marker in its process's home and the receipts
// in the profile's: a guard reads both wherever its home is, the root or a
// profile under it.
func TestPlanReloadProfiles(t *testing.T) {
	t.Run("guard at the root, receipt in a profile", func(t *testing.T) {
		c := newReloadCase(t)
		writeFile(t, filepath.Join(receiptsDir(filepath.Join(c.home, "profiles", "work")), "latest.json"),
			string(gittest.HermesReceipt(t, "gen3-correlation-success-latest.json", c.moved, time.Now())))
		r, err := c.g.PlanReload(context.Background())
		require.NoError(t, err)
		r.Release()
		// The updater's marker in the root refuses.
		gittest.WriteMarker(t, filepath.Join(c.home, hermesMarker), os.Getpid(), time.Now())
		_, err = c.g.PlanReload(context.Background())
		assert.ErrorContains(t, err, "the update marker")
	})
	t.Run("guard in a profile, marker at the root", func(t *testing.T) {
		tmp := tempDir(t)
		dir, root := filepath.Join(tmp, "hermes", "hermes-agent"), filepath.Join(tmp, "hermes")
		profile := filepath.Join(root, "profiles", "work")
		require.NoError(t, os.MkdirAll(profile, 0o755))
		module, _ := agentRepo(t, dir)
		g, err := New(Options{ModulePath: module, HomeDir: profile})
		require.NoError(t, err)
		moved := commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n")
		gittest.WriteMarker(t, filepath.Join(root, hermesMarker), os.Getpid(), time.Now())
		writeFile(t, filepath.Join(receiptsDir(profile), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", moved, time.Now())))
		_, err = g.PlanReload(context.Background())
		assert.ErrorContains(t, err, "the update marker "+filepath.Join(root, hermesMarker))
		assert.Equal(t, UpdateActive, g.Observe().State, "the root's marker counts in the profile's diagnostic")
		require.NoError(t, os.Remove(filepath.Join(root, hermesMarker)))
		r, err := g.PlanReload(context.Background())
		require.NoError(t, err)
		r.Release()
	})
}

// Schedule racing Release on one plan never leaves a released plan
// scheduled. (The plans are made as PlanReload makes them, without its
// read of the checkout, so that the race is run often enough to show.)
func TestScheduleRacingRelease(t *testing.T) {
	c := newReloadCase(t)
	b := c.g.bound.Load()
	// Every round runs the race; RUNTIMEGUARD_LONG runs it more often.
	for i := 0; i < loopLength(100000, 20000); i++ {
		r := &Plan{From: c.loaded, To: c.moved, Receipt: Receipt{ID: fmt.Sprint("race:", i)}, g: c.g, b: b}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _ = r.Schedule() }()
		go func() { defer wg.Done(); r.Release() }()
		wg.Wait()
		if c.g.bound.Load().plans.isScheduled() {
			t.Fatalf("round %d: a released plan is scheduled", i)
		}
	}
	var se *StaleError
	require.ErrorAs(t, c.g.EnsureCurrent(), &se)
	assert.False(t, se.RestartScheduled)
}

// A stale check reads no receipt (its answer needs only the update state),
// and a plan parses an unchanged receipt once: a long receipt costs a
// stale request nothing.
func TestStaleCheckReadsNoReceipt(t *testing.T) {
	tmp := tempDir(t)
	dir, home := filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
	module, _ := agentRepo(t, dir)
	e := *systemEnv
	u := *e.upd
	var mu sync.Mutex
	opens := map[string]int{}
	u.Open = func(path string, limit int64) ([]byte, updater.FileKind, string) {
		mu.Lock()
		opens[filepath.Base(path)]++
		mu.Unlock()
		return updater.SafeOpen(path, limit)
	}
	u.Now = func() time.Time { return time.Now().Add(time.Second) } // the receipt's stamp is settled
	e.upd = &u
	g, err := newGuard(Options{ModulePath: module, HomeDir: home}, &e)
	require.NoError(t, err)
	moved := commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(home), "latest.json"), string(gittest.HermesReceipt(t, "gen1-300-steps-success.json", moved, time.Now())))
	for i := 0; i < 50; i++ {
		require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
	}
	mu.Lock()
	assert.Zero(t, opens["latest.json"], "stale checks opened the receipt")
	mu.Unlock()
	for i := 0; i < 3; i++ {
		r, err := g.PlanReload(context.Background())
		require.NoError(t, err)
		r.Release()
	}
	mu.Lock()
	assert.Equal(t, 1, opens["latest.json"], "three plans on an unchanged receipt")
	mu.Unlock()
}

// More profile homes than a guard reads must not hide one: an active
// marker or a newer failed receipt in a profile past the bound refuses the
// plan, as one in the first profile does, instead of going unread.
func TestPlanReloadManyProfiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, c *reloadCase, last string)
	}{
		{"marker in the last profile", func(t *testing.T, c *reloadCase, last string) {
			gittest.WriteMarker(t, filepath.Join(last, hermesMarker), os.Getpid(), time.Now())
		}},
		{"newer failure in the last profile", func(t *testing.T, c *reloadCase, last string) {
			writeFile(t, filepath.Join(receiptsDir(last), "latest.json"),
				string(gittest.HermesReceipt(t, "gen1-update-id-failed.json", c.moved, time.Now().Add(time.Second))))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newReloadCase(t)
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"),
				string(gittest.HermesReceipt(t, "gen3-correlation-success-latest.json", c.moved, time.Now())))
			r, err := c.g.PlanReload(context.Background())
			require.NoError(t, err, "the root's receipt proves, with no profile")
			r.Release()
			var last string
			for i := range 3 * maxProfileHomes {
				last = filepath.Join(c.home, "profiles", fmt.Sprintf("p%04d", i))
				require.NoError(t, os.MkdirAll(last, 0o755))
			}
			tc.write(t, c, last)
			r, err = c.g.PlanReload(context.Background())
			r.Release()
			require.ErrorIs(t, err, ErrNotReady, "a profile that is not read proves nothing")
			assert.Contains(t, err.Error(), "profile")
			assert.NotEqual(t, UpdateUnverified, c.g.Observe().State)
		})
	}
}

// Hermes keeps 20 receipts a home: an install of many profiles that each
// ran their updates keeps more than a bound over all homes allows, and
// its reloads must still be proven. (13 profiles of 20 receipts, all
// there at binding: 260 files.)
func TestPlanReloadProfilesWithFullHistories(t *testing.T) {
	tmp := tempDir(t)
	dir, root := filepath.Join(tmp, "hermes", "hermes-agent"), filepath.Join(tmp, "hermes")
	module, _ := agentRepo(t, dir)
	old := gittest.HermesReceipt(t, "gen1-update-id-failed.json", strings.Repeat("0", 40), time.Now().Add(-time.Hour))
	for p := range 13 {
		for i := range 20 {
			writeFile(t, filepath.Join(receiptsDir(filepath.Join(root, "profiles", fmt.Sprintf("p%02d", p))), fmt.Sprintf("update_2026%04d_1.json", i)), string(old))
		}
	}
	g, err := New(Options{ModulePath: module, HomeDir: root})
	require.NoError(t, err)
	moved := commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(root), "latest.json"), string(gittest.HermesReceipt(t, "gen1-update-id-success.json", moved, time.Now())))
	r, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	assert.Equal(t, moved, r.To)
	r.Release()
}
