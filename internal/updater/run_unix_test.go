//go:build unix

package updater

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// testMaxAge is the age limit of the markers Run's tests claim.
const testMaxAge = 10 * time.Minute

// runCase is a clone of an upstream one commit ahead, and a home for the
// updater's files.
type runCase struct {
	dir, home, loaded, ahead string
	stderr                   bytes.Buffer
}

func newRunCase(t *testing.T) *runCase {
	t.Helper()
	tmp := tempDir(t)
	c := &runCase{dir: filepath.Join(tmp, "agent"), home: filepath.Join(tmp, "home")}
	upstream := filepath.Join(tmp, "upstream")
	_, c.loaded = gittest.Agent(t, upstream)
	gittest.Git(t, tmp, "clone", "-q", upstream, c.dir)
	c.ahead = gittest.Commit(t, upstream, "run_agent.py", "class AIAgent: revision = 2\n")
	return c
}

func (c *runCase) marker() string { return filepath.Join(c.home, markerName) }
func (c *runCase) receipt() string {
	return filepath.Join(c.home, "logs", "update_receipts", "latest.json")
}

// update is the Update of argv in the clone, its revision read by git.
func (c *runCase) update(t *testing.T, argv ...string) Update {
	return Update{
		Home:   c.home,
		Marker: c.marker(), Receipt: c.receipt(), Lock: filepath.Join(c.home, "update.lock"),
		LockWait: 100 * time.Millisecond, Judge: System.Judge(testMaxAge),
		Argv: argv, Dir: c.dir, Env: gittest.Env, Stdout: &c.stderr, Stderr: &c.stderr,
		Inspect: func() (string, string, string, error) {
			return gittest.Git(t, c.dir, "rev-parse", "HEAD"), "", "", nil
		},
		Leftover: func() ([]string, string) {
			present, err := RecoveryMarkers([]string{c.dir}, []string{incomplete, lazy})
			if err != nil {
				return present, err.Error()
			}
			return present, ""
		},
	}
}

// readReceipt decodes the latest receipt.
func (c *runCase) readReceipt(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(c.receipt())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m), "%s", data)
	return m
}

// A command that succeeds under the protocol: the marker and a running
// receipt while it runs, a success receipt with both revisions after, the
// run's own receipt beside it, no marker and a free lock.
func TestRunSuccess(t *testing.T) {
	c := newRunCase(t)
	seen := filepath.Join(tempDir(t), "seen")
	script := "git pull -q --ff-only && cat " + c.marker() + " " + c.receipt() + " > " + seen
	res, err := System.Run(context.Background(), c.update(t, "sh", "-c", script))
	require.NoError(t, err, c.stderr.String())
	assert.Empty(t, res.Failure)
	assert.Equal(t, 0, res.ExitCode)
	assert.Equal(t, OutcomeSuccess, res.Receipt.Outcome)
	assert.Equal(t, c.loaded, res.Receipt.From)
	assert.Equal(t, c.ahead, res.Receipt.To)

	during, err := os.ReadFile(seen)
	require.NoError(t, err)
	assert.Regexp(t, `^\d+\n\d+\n(ct:\d+\.\d{3}\n)?\{`, string(during), "the marker: a process ID, a time in whole seconds and a creation time")
	assert.Contains(t, string(during), `"outcome": "running"`)

	m := c.readReceipt(t)
	assert.Equal(t, "success", m["outcome"])
	assert.Equal(t, res.Receipt.UpdateID, m["update_id"])
	assert.Equal(t, map[string]any{"sha": c.ahead}, m["post_update"])
	runs, err := filepath.Glob(filepath.Join(filepath.Dir(c.receipt()), "update_*_"+res.Receipt.UpdateID+".json"))
	require.NoError(t, err)
	assert.Len(t, runs, 1, "the run's own receipt")
	assert.NoFileExists(t, c.marker())
	lock, err := Lock("", filepath.Join(c.home, "update.lock"), true)
	require.NoError(t, err, "the lock is free")
	require.NoError(t, lock.Close())
}

// Run tells its Step of every step that touches a file system it does
// not leave to the caller: each names what it touches (with the wait a
// lock there may rightly take), down to each receipt it writes, reads or
// prunes and the lookup of the command; the command and the caller's own
// reads (Inspect, Leftover, Markers) run with "" told before them, so that
// a caller that gives up on a step never gives up on the command; "" is
// told last, as Run returns. A step is told again before each flush of a
// write (a wait of its own). Holds is told of each lock Run holds: the
// layout's, the checkout's, and the marker's sidecar as it is claimed and
// released.
func TestRunTellsEachStep(t *testing.T) {
	c := newRunCase(t)
	u := c.update(t, "true")
	u.CheckoutLock = filepath.Join(c.dir, ".git", HermesCheckoutLock)
	receipts := filepath.Dir(c.receipt())
	for i := range keepReceipts + 1 { // one more than kept: with the run's own, two are pruned
		old := filepath.Join(receipts, fmt.Sprintf("update_2020010%dT000000Z_1_%02d.json", i%9+1, i))
		gittest.WriteFile(t, old, "{}\n")
	}
	var steps []string
	u.Step = func(what string, wait time.Duration) {
		if wait != 0 {
			what += fmt.Sprintf(" (%v)", wait)
		}
		if n := len(steps); n > 0 && steps[n-1] == what && what != "" {
			what += " again" // a flush of the write told before it
		}
		steps = append(steps, what)
	}
	var held []string
	u.Holds = func(f *os.File) { held = append(held, f.Name()) }
	inspect, leftover := u.Inspect, u.Leftover
	u.Inspect = func() (string, string, string, error) {
		steps = append(steps, "[inspect]")
		rev, none, _, err := inspect()
		return rev, none, c.dir, err
	}
	u.Leftover = func() ([]string, string) {
		steps = append(steps, "[leftover]")
		return leftover()
	}
	res, err := System.Run(context.Background(), u)
	require.NoError(t, err)
	require.Empty(t, res.Failure)
	own := filepath.Join(receipts, ReceiptFileName(&res.Receipt, os.Getpid()))
	before := []string{
		"the lock " + u.Lock + " (100ms)",
		"the checkout lock " + u.CheckoutLock + fmt.Sprintf(" (%v)", CheckoutContentionWait),
		"", // Markers: Judge.Read, read by Run itself, names the marker
		"the marker " + c.marker(),
		"the receipts' directory " + receipts,
		"the home " + c.home,
		"the marker " + c.marker() + fmt.Sprintf(" (%v)", claimLockWait),
		"the marker " + c.marker(), "the marker " + c.marker() + " again", "the marker " + c.marker(), // the sidecar held; the flushes
		"", "[inspect]", "the checkout " + c.dir,
		"the receipts' directory " + receipts,
		"the receipt " + c.receipt(), "the receipt " + c.receipt() + " again", "the receipt " + c.receipt(),
		"the command true (in " + c.dir + ")",
		"", "[inspect]", "the checkout " + c.dir,
		"", "[leftover]",
		"the receipts' directory " + receipts,
		"the receipt " + own, "the receipt " + own + " again", "the receipt " + own,
		"the receipt " + c.receipt(), "the receipt " + c.receipt() + " again", "the receipt " + c.receipt(),
		"the receipts' directory " + receipts, // pruned
	}
	after := []string{
		"the marker " + c.marker() + fmt.Sprintf(" (%v)", claimLockWait),
		"the checkout lock " + u.CheckoutLock,
		"the lock " + u.Lock,
		"",
	}
	require.Greater(t, len(steps), len(before)+len(after), "%q", steps)
	assert.Equal(t, before, steps[:len(before)])
	assert.Equal(t, after, steps[len(steps)-len(after):])
	// The pruning: each history receipt read, then each of the two removed.
	pruned := steps[len(before) : len(steps)-len(after)]
	assert.Len(t, pruned, keepReceipts+2+2, "%q", pruned)
	for _, s := range pruned {
		assert.True(t, strings.HasPrefix(s, "the receipt "+receipts+string(filepath.Separator)+"update_"), "%q", s)
	}
	names, err := filepath.Glob(filepath.Join(receipts, ReceiptHistoryPattern))
	require.NoError(t, err)
	assert.Len(t, names, keepReceipts)
	sidecar := c.marker() + MarkerLockSuffix
	assert.Equal(t, []string{u.Lock, u.CheckoutLock, sidecar, sidecar}, held)
}

// The command runs in the environment the Update gives, whatever this
// process's is: here the harness's, so that git pull reads no user's
// config, even one whose hooks fail (as a HOME of its own shows, where
// the command run in this process's environment fails).
func TestRunCommandRunsInTheUpdatesEnvironment(t *testing.T) {
	c := newRunCase(t)
	t.Setenv("HOME", gittest.HostileHome(t))
	res, err := System.Run(context.Background(), c.update(t, "git", "pull", "-q", "--ff-only"))
	require.NoError(t, err)
	require.Empty(t, res.Failure, c.stderr.String())
	assert.Equal(t, c.ahead, res.Receipt.To)

	c = newRunCase(t)
	u := c.update(t, "git", "pull", "-q", "--ff-only")
	u.Env = os.Environ()
	res, err = System.Run(context.Background(), u)
	require.NoError(t, err)
	assert.Contains(t, res.Failure, "exited", "the home's hooks fail a git that reads its config: %s", c.stderr.String())
}

// A command that fails, or leaves a recovery marker, is a failed receipt
// with the reason; the exit status is the command's.
func TestRunFailure(t *testing.T) {
	c := newRunCase(t)
	res, err := System.Run(context.Background(), c.update(t, "sh", "-c", "git pull -q --ff-only && exit 7"))
	require.NoError(t, err)
	assert.Equal(t, 7, res.ExitCode)
	assert.Contains(t, res.Failure, "exited 7")
	assert.Equal(t, "failed", c.readReceipt(t)["outcome"])
	assert.NoFileExists(t, c.marker())

	res, err = System.Run(context.Background(), c.update(t, "sh", "-c", "touch "+incomplete))
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode)
	assert.Contains(t, res.Failure, incomplete)
	assert.Equal(t, "failed", c.readReceipt(t)["outcome"])

	// Recovery markers that cannot all be looked for prove nothing of
	// the update: it did not succeed, though its command did.
	u := c.update(t, "true")
	u.Leftover = func() ([]string, string) { return nil, "the install root /opt/x cannot be searched" }
	res, err = System.Run(context.Background(), u)
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode)
	assert.Contains(t, res.Failure, "the install root /opt/x cannot be searched")
	assert.Equal(t, "failed", c.readReceipt(t)["outcome"])

	res, err = System.Run(context.Background(), c.update(t, filepath.Join(c.dir, "no-such-command")))
	require.NoError(t, err)
	assert.Error(t, res.RunErr)
	assert.NotEmpty(t, res.Failure)
	assert.Equal(t, "failed", c.readReceipt(t)["outcome"])

	// A signal ends the command: the context's end, once the command
	// runs, interrupts it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := filepath.Join(tempDir(t), "started")
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(started); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	res, err = System.Run(ctx, c.update(t, "sh", "-c", "touch "+started+"; exec sleep 30"))
	require.NoError(t, err)
	assert.Equal(t, -1, res.ExitCode)
	assert.Contains(t, res.Failure, "killed by a signal")
}

// A live updater's marker, a marker that proves nothing, or the lock held
// refuses the update before the command runs or anything is written.
func TestRunRefuses(t *testing.T) {
	c := newRunCase(t)
	ran := filepath.Join(tempDir(t), "ran")
	try := func() error {
		_, err := System.Run(context.Background(), c.update(t, "touch", ran))
		assert.NoFileExists(t, ran, "the command ran")
		assert.NoFileExists(t, c.receipt(), "a receipt was written")
		return err
	}
	gittest.WriteMarker(t, c.marker(), os.Getpid(), time.Now())
	err := try()
	assert.ErrorIs(t, err, ErrRefused)
	assert.ErrorContains(t, err, "another updater is running")

	writeFile(t, c.marker(), "garbage")
	err = try()
	assert.ErrorIs(t, err, ErrRefused)
	assert.ErrorContains(t, err, "proves nothing")
	require.NoError(t, os.Remove(c.marker()))

	shared, err := Lock("", filepath.Join(c.home, "update.lock"), false)
	require.NoError(t, err, "a reload plan's shared lock")
	err = try()
	assert.ErrorIs(t, err, ErrRefused)
	assert.ErrorContains(t, err, "holds")
	require.NoError(t, shared.Close())

	// Markers, where given, are what refuses: another home's marker.
	u := c.update(t, "touch", ran)
	u.Markers = func() (Verdict, string) { return Verdict{Live, "process 1 is alive"}, "/elsewhere/marker" }
	_, err = System.Run(context.Background(), u)
	assert.ErrorIs(t, err, ErrRefused)
	assert.ErrorContains(t, err, "/elsewhere/marker")
	assert.NoFileExists(t, ran)

	// A stale marker is no refusal: it is replaced.
	gittest.WriteMarker(t, c.marker(), os.Getpid(), time.Now().Add(-time.Hour))
	res, err := System.Run(context.Background(), c.update(t, "true"))
	require.NoError(t, err)
	assert.Empty(t, res.Failure)
	assert.NoFileExists(t, c.marker())
}

// The command holds the lock too, as descriptor 3: what it writes there
// lands in the lock file.
func TestRunCommandHoldsTheLock(t *testing.T) {
	c := newRunCase(t)
	res, err := System.Run(context.Background(), c.update(t, "sh", "-c", "echo held by the command >&3"))
	require.NoError(t, err)
	require.Empty(t, res.Failure, c.stderr.String())
	data, err := os.ReadFile(filepath.Join(c.home, "update.lock"))
	require.NoError(t, err)
	assert.Equal(t, "held by the command\n", string(data))
}

// Run refuses an Update that describes none.
func TestRunRefusesAnIncompleteUpdate(t *testing.T) {
	for _, u := range []Update{
		{Receipt: "/r", Argv: []string{"true"}, Inspect: func() (string, string, string, error) { return "", "", "", nil }},
		{Marker: "/m", Argv: []string{"true"}, Inspect: func() (string, string, string, error) { return "", "", "", nil }},
		{Marker: "/m", Receipt: "/r", Inspect: func() (string, string, string, error) { return "", "", "", nil }},
		{Marker: "/m", Receipt: "/r", Argv: []string{"true"}},
		{Marker: "/m", Receipt: "/r", Argv: []string{"true"}, Judge: System.Judge(testMaxAge), Inspect: func() (string, string, string, error) { return "", "", "", nil }},
	} {
		_, err := System.Run(context.Background(), u)
		assert.Error(t, err, "%+v", u)
	}
}

// The writer's files are never written through a link: with a link at the
// marker's name, at its sidecar lock's, at the layout's lock, at the
// checkout lock, or in place of the receipts' directory, Run refuses
// before its command runs, and the file the link leads to stays as it was
// (or is not made); a link at the latest receipt's name is replaced by the
// receipt, not written through.
func TestRunNeverWritesThroughALink(t *testing.T) {
	refusals := map[string]func(c *runCase, u *Update) string{
		"the marker":        func(c *runCase, u *Update) string { return c.marker() },
		"the sidecar lock":  func(c *runCase, u *Update) string { return c.marker() + MarkerLockSuffix },
		"the layout's lock": func(c *runCase, u *Update) string { return u.Lock },
		"the checkout lock": func(c *runCase, u *Update) string {
			u.CheckoutLock = filepath.Join(c.dir, ".git", HermesCheckoutLock)
			return u.CheckoutLock
		},
		"the receipts' directory": func(c *runCase, u *Update) string { return filepath.Join(c.home, "logs") },
	}
	for name, at := range refusals {
		for _, dangling := range []bool{false, true} {
			t.Run(name+map[bool]string{false: ", a link to a file", true: ", a dangling link"}[dangling], func(t *testing.T) {
				c := newRunCase(t)
				ran := filepath.Join(tempDir(t), "ran")
				u := c.update(t, "touch", ran)
				target := linkAt(t, at(c, &u), dangling)
				_, err := System.Run(context.Background(), u)
				assert.Error(t, err, c.stderr.String())
				assert.NoFileExists(t, ran, "the command ran")
				untouched(t, target, dangling)
			})
		}
	}
	t.Run("the receipts' directory, a link to a directory", func(t *testing.T) {
		c := newRunCase(t)
		elsewhere := tempDir(t)
		require.NoError(t, os.MkdirAll(c.home, 0o755))
		require.NoError(t, os.Symlink(elsewhere, filepath.Join(c.home, "logs")))
		ran := filepath.Join(tempDir(t), "ran")
		_, err := System.Run(context.Background(), c.update(t, "touch", ran))
		assert.Error(t, err, c.stderr.String())
		assert.NoFileExists(t, ran, "the command ran")
		assert.NoDirExists(t, filepath.Join(elsewhere, "update_receipts"), "made where the link leads")
	})
	t.Run("the latest receipt", func(t *testing.T) {
		c := newRunCase(t)
		target := linkAt(t, c.receipt(), false)
		res, err := System.Run(context.Background(), c.update(t, "true"))
		require.NoError(t, err, c.stderr.String())
		assert.Empty(t, res.Failure)
		untouched(t, target, false)
		fi, err := os.Lstat(c.receipt())
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "the receipt replaced the link")
	})
}

// A directory of the home replaced by a link while the command runs: the
// final receipt, the prune of old receipts, and the release of a marker
// kept in a directory of the home are made where the directories opened
// from the home lead, never where the link leads; the files there stay as
// they were, none made, none removed.
func TestRunWritesNothingWhereALinkSwappedInLeads(t *testing.T) {
	for _, tc := range []struct {
		name   string
		marker string // the marker, relative to the home
		swap   string // the directory replaced, relative to the home
	}{
		{"the receipts' directory", markerName, filepath.Join("logs", "update_receipts")},
		{"the logs directory", markerName, "logs"},
		{"the marker's directory", filepath.Join("run", markerName), "run"},
		{"the home itself", markerName, "."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRunCase(t)
			victim := tempDir(t)
			old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			var precious []string
			for i := range 25 {
				name := fmt.Sprintf("update_%02d.json", i)
				writeFile(t, filepath.Join(victim, name), "precious\n")
				require.NoError(t, os.Chtimes(filepath.Join(victim, name), old, old.Add(time.Duration(i)*time.Second)))
				precious = append(precious, name)
			}
			swapped := filepath.Join(c.home, tc.swap)
			u := c.update(t, "sh", "-c", `mv "$1" "$1.old" && ln -s "$2" "$1"`, "sh", swapped, victim)
			u.Marker = filepath.Join(c.home, tc.marker)
			require.NoError(t, os.MkdirAll(filepath.Dir(u.Marker), 0o755))
			_, _ = System.Run(context.Background(), u)
			entries, err := os.ReadDir(victim)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
				data, err := os.ReadFile(filepath.Join(victim, e.Name()))
				require.NoError(t, err)
				assert.Equal(t, "precious\n", string(data), "%s was written", e.Name())
			}
			assert.ElementsMatch(t, precious, names, "files made or removed where the link leads")
		})
	}
}
