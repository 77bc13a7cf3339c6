package runtimeguard

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// threads is the number of this process's OS threads.
func threads(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no thread count in /proc/self/status")
	return 0
}

// boundSlack is how many goroutines or threads besides those blocked on
// the file system may come and go between two counts (a worker about to
// end, the runtime's own).
const boundSlack = 4

// A hung file system holds a fixed number of goroutines and OS threads in
// a process, whatever the number of calls: Observe, New and Close of
// guards whose home (or checkout) is on it, called 1, 4 and 16 times more,
// each return within ReadTimeout and leave no more blocked behind them
// than the first calls did.
func TestAHungFileSystemHoldsAFixedNumberOfGoroutines(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(t *testing.T, mnt string)
	}{
		{"Observe on a hung home", func(t *testing.T, mnt string) {
			_, err := Observe(Options{ModulePath: filepath.Join(mnt, "agent", "run_agent.py"), HomeDir: mnt, ReadTimeout: hangTimeout})
			require.NoError(t, err)
		}},
		{"New on a hung home", func(t *testing.T, mnt string) {
			g, err := New(Options{ModulePath: filepath.Join(mnt, "..", "agent", "run_agent.py"), HomeDir: mnt, ReadTimeout: hangTimeout})
			assert.ErrorIs(t, err, ErrReadTimeout)
			assert.Nil(t, g)
		}},
		{"New on a hung checkout", func(t *testing.T, mnt string) {
			_, err := New(Options{ModulePath: filepath.Join(mnt, "agent", "run_agent.py"), HomeDir: filepath.Join(mnt, "..", "home"), ReadTimeout: hangTimeout})
			assert.ErrorIs(t, err, ErrReadTimeout)
		}},
		{"Close of a zero Guard with a hung home", func(t *testing.T, mnt string) {
			var g Guard
			require.NoError(t, g.Close())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := tempDir(t)
			agent := filepath.Join(tmp, "agent")
			agentRepo(t, agent)
			require.NoError(t, os.Mkdir(filepath.Join(tmp, "home"), 0o755))
			f := hungMount(t, map[string]string{"agent": agent})
			// The test's own paths beside the mount: New on a hung home
			// binds a checkout that answers, through "..".
			require.NoError(t, os.Symlink(agent, filepath.Join(filepath.Dir(f.Dir), "agent")))
			t.Setenv("HERMES_HOME", f.Dir)
			f.Hang()
			call := func(n int) {
				for range n {
					done := make(chan struct{})
					go func() { defer close(done); tc.call(t, f.Dir) }()
					select {
					case <-done:
					case <-time.After(2 * DefaultReadTimeout): // the zero Guard's ReadTimeout, and more
						t.Fatalf("a call waited on the hung file system:\n%s", allStacks())
					}
				}
			}
			call(1)
			require.Positive(t, f.Pending(), "no call reached the hung file system")
			pending, goroutines, threads0 := f.Pending(), runtime.NumGoroutine(), threads(t)
			for _, n := range []int{4, 16} {
				call(n)
				assert.Equal(t, pending, f.Pending(), "system calls blocked on the hung file system after %d calls more", n)
				assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines+boundSlack, "goroutines after %d calls more", n)
				assert.LessOrEqual(t, threads(t), threads0+boundSlack, "OS threads after %d calls more", n)
			}
		})
	}
}
