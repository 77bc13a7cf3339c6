package runtimeguard

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// settleDuration is how long each loop below runs: 4 s with
// RUNTIMEGUARD_LONG, else 1 s; RUNTIMEGUARD_SETTLE overrides it (for
// example 10s to match a long soak).
func settleDuration(t *testing.T) time.Duration {
	t.Helper()
	if s := os.Getenv("RUNTIMEGUARD_SETTLE"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err)
		return d
	}
	if testing.Short() || !longTests {
		return time.Second
	}
	return 4 * time.Second
}

// Binding while git renames, packs and collects garbage in a loop never
// yields an inert guard: every New either binds to the right revision or
// returns an error. A transient state (HEAD naming a branch that is being
// renamed) must not become a guard that passes every check forever.
func TestBindingDuringRefTransients(t *testing.T) {
	loops := map[string][][]string{
		"branch renames":             {{"branch", "-m", "main", "trunk"}, {"branch", "-m", "trunk", "main"}},
		"renames of the only branch": {{"branch", "-m", "main", "trunk"}, {"branch", "-m", "trunk", "main"}},
		"renames and pack-refs":      {{"branch", "-m", "main", "trunk"}, {"pack-refs", "--all"}, {"branch", "-m", "trunk", "main"}, {"pack-refs", "--all"}},
		"renames and gc":             {{"branch", "-m", "main", "trunk"}, {"gc", "-q"}, {"branch", "-m", "trunk", "main"}, {"gc", "-q"}},
	}
	for name, cmds := range loops {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := tempDir(t)
			module, rev := agentRepo(t, dir)
			// Another ref, so that HEAD naming a missing branch is never an
			// unborn repository; without it, HEAD's reflog tells.
			if name != "renames of the only branch" {
				git(t, dir, "tag", "t")
			}

			stop := make(chan struct{})
			var loopErr error
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if out, err := gittest.Command(dir, cmds[i%len(cmds)]...).CombinedOutput(); err != nil {
						loopErr = err
						t.Logf("git %v: %v: %s", cmds[i%len(cmds)], err, out)
						return
					}
				}
			}()
			var binds, inert, failed atomic.Int64
			deadline := time.Now().Add(settleDuration(t))
			for time.Now().Before(deadline) {
				g, err := New(Options{ModulePath: module, HomeDir: dir})
				binds.Add(1)
				switch {
				case err != nil:
					failed.Add(1)
				case g.Identity().Revision == "":
					inert.Add(1)
				default:
					assert.Equal(t, rev, g.Identity().Revision)
				}
			}
			close(stop)
			wg.Wait()
			require.NoError(t, loopErr)
			t.Logf("%d binds, %d inert, %d errors", binds.Load(), inert.Load(), failed.Load())
			assert.Zero(t, inert.Load(), "inert binds")
			assert.Less(t, failed.Load(), binds.Load()/10+1, "most binds find the checkout holding still")
		})
	}
}

// Capture on an unbound guard takes the same care.
func TestCaptureDuringBranchRenames(t *testing.T) {
	t.Parallel() // a repository of its own; a loop that runs for a set time
	dir := tempDir(t)
	module, rev := agentRepo(t, dir)
	git(t, dir, "tag", "t")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			from, to := "main", "trunk"
			if i%2 == 1 {
				from, to = to, from
			}
			_ = gittest.Command(dir, "branch", "-m", from, to).Run()
		}
	}()
	deadline := time.Now().Add(settleDuration(t) / 2)
	var inert int
	for time.Now().Before(deadline) {
		g, err := New(Options{HomeDir: dir})
		require.NoError(t, err)
		if err := g.Capture(module); err == nil && g.Identity().Revision == "" {
			inert++
		} else if err == nil {
			assert.Equal(t, rev, g.Identity().Revision)
		}
	}
	close(stop)
	<-done
	assert.Zero(t, inert, "inert captures")
}
