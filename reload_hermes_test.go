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

// hermesReceipt returns the receipt fixture name, written by a generation
// of the Hermes Agent's own writer, with its post_update.sha set to post
// and its times to finish at finished.
func hermesReceipt(t testing.TB, name, post string, finished time.Time) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "hermes-receipts", name))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000+00:00") }
	m["started_at"] = iso(finished.Add(-time.Second))
	m["finished_at"] = iso(finished)
	m["post_update"].(map[string]any)["sha"] = post
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(m))
	return b.Bytes()
}

// newestWriterReceipt is a receipt as the newest generation of Hermes's writer
// finalizes it at the command's end: the third generation's, with an
// exit_code and a stop_reason, and the outcome given.
func newestWriterReceipt(t testing.TB, outcome, post string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(hermesReceipt(t, "gen3-correlation-success-latest.json", post, time.Now()), &m))
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
			data := hermesReceipt(t, "gen1-update-id-success.json", c.moved, time.Now())
			writeFile(t, filepath.Join(receiptsDir(c.home), "update_20261201_081337_11796_cbb7f64cc2e84a219879acf0c9b1f053.json"), string(data))
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(data))
		}, ""},
		{"gen1, 300 steps", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen1-300-steps-success.json", c.moved, time.Now())))
		}, ""},
		{"gen2, no id", func(t *testing.T, c *reloadCase) {
			data := hermesReceipt(t, "gen2-no-id-success.json", c.moved, time.Now())
			writeFile(t, filepath.Join(receiptsDir(c.home), "update_20261201_081340_12054.json"), string(data))
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(data))
		}, ""},
		{"gen3, correlation_id, copies that differ", func(t *testing.T, c *reloadCase) {
			at := time.Now()
			writeFile(t, filepath.Join(receiptsDir(c.home), "update_20261201_081340_12125_corr-123_x.json"), string(hermesReceipt(t, "gen3-correlation-success-retained.json", c.moved, at)))
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen3-correlation-success-latest.json", c.moved, at)))
		}, ""},
		{"gen1 failed", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-failed.json", c.moved, time.Now())))
		}, `outcome is "failed"`},
		{"a lost latest.json: a newer retained success", func(t *testing.T, c *reloadCase) {
			// latest.json is an older run's, written before the guard bound.
			writeFile(t, filepath.Join(receiptsDir(c.home), "update_20261201_090000_1.json"), string(hermesReceipt(t, "gen2-no-id-success.json", c.moved, time.Now())))
		}, ""},
		{"a newer retained failure, whatever latest.json says", func(t *testing.T, c *reloadCase) {
			now := time.Now()
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", c.moved, now.Add(-time.Second))))
			writeFile(t, filepath.Join(receiptsDir(c.home), "update_20261201_090001_2_x.json"), string(hermesReceipt(t, "gen1-update-id-failed.json", c.moved, now)))
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
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen3-correlation-success-latest.json", c.loaded, time.Now())))
		}, "is for revision"},
		{"a half-written latest.json", func(t *testing.T, c *reloadCase) {
			data := hermesReceipt(t, "gen2-no-id-success.json", c.moved, time.Now())
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(data[:len(data)/2]))
		}, "not usable"},
		{"a release in flight beside the marker", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen3-correlation-success-latest.json", c.moved, time.Now())))
			writeMarker(t, filepath.Join(c.home, fmt.Sprintf("%s.cas-release-%d-0b7e", hermesMarker, os.Getpid())), os.Getpid(), time.Now())
		}, "releasing the marker"},
		{"a release whose process is gone", func(t *testing.T, c *reloadCase) {
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"), string(hermesReceipt(t, "gen3-correlation-success-latest.json", c.moved, time.Now())))
			writeMarker(t, filepath.Join(c.home, fmt.Sprintf("%s.cas-release-%d-0b7e", hermesMarker, gittest.ExitedPID(t, processGone))), os.Getpid(), time.Now())
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
	writeFile(t, filepath.Join(receiptsDir(home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", moved, bound.Add(3*time.Second))))

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
	writeFile(t, filepath.Join(receiptsDir(home), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", moved, bound.Add(3*time.Second))))
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
			string(hermesReceipt(t, "gen3-correlation-success-latest.json", c.moved, time.Now())))
		r, err := c.g.PlanReload(context.Background())
		require.NoError(t, err)
		r.Release()
		// The updater's marker in the root refuses.
		writeMarker(t, filepath.Join(c.home, hermesMarker), os.Getpid(), time.Now())
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
		writeMarker(t, filepath.Join(root, hermesMarker), os.Getpid(), time.Now())
		writeFile(t, filepath.Join(receiptsDir(profile), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", moved, time.Now())))
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
	writeFile(t, filepath.Join(receiptsDir(home), "latest.json"), string(hermesReceipt(t, "gen1-300-steps-success.json", moved, time.Now())))
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
			writeMarker(t, filepath.Join(last, hermesMarker), os.Getpid(), time.Now())
		}},
		{"newer failure in the last profile", func(t *testing.T, c *reloadCase, last string) {
			writeFile(t, filepath.Join(receiptsDir(last), "latest.json"),
				string(hermesReceipt(t, "gen1-update-id-failed.json", c.moved, time.Now().Add(time.Second))))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newReloadCase(t)
			writeFile(t, filepath.Join(receiptsDir(c.home), "latest.json"),
				string(hermesReceipt(t, "gen3-correlation-success-latest.json", c.moved, time.Now())))
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
	old := hermesReceipt(t, "gen1-update-id-failed.json", strings.Repeat("0", 40), time.Now().Add(-time.Hour))
	for p := range 13 {
		for i := range 20 {
			writeFile(t, filepath.Join(receiptsDir(filepath.Join(root, "profiles", fmt.Sprintf("p%02d", p))), fmt.Sprintf("update_2026%04d_1.json", i)), string(old))
		}
	}
	g, err := New(Options{ModulePath: module, HomeDir: root})
	require.NoError(t, err)
	moved := commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n")
	writeFile(t, filepath.Join(receiptsDir(root), "latest.json"), string(hermesReceipt(t, "gen1-update-id-success.json", moved, time.Now())))
	r, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	assert.Equal(t, moved, r.To)
	r.Release()
}
