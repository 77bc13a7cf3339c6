package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fusehang"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// Every command whose --module, --home or marker path is on a file system
// that stopped answering ends within one read timeout, saying what it
// gave up on, with the exit code for that (7; marker: the marker is
// unknown, 6); status with a hung home prints all it could, and says that
// no guard bound and why.
func TestCommandsGiveUpOnAHungMount(t *testing.T) {
	t.Parallel() // processes, files and mounts of its own
	for _, tc := range []struct {
		name string
		// args are the command line, with the mount at mnt (which leads
		// to the checkout's directory as mnt/agent) and a checkout that
		// answers at module.
		args func(mnt, module, home string) []string
		code int
		// stderr and stdout hold these.
		stderr, stdout string
	}{
		{"status, module through the mount", func(mnt, module, home string) []string {
			return []string{"status", "--module", filepath.Join(mnt, "agent", "run_agent.py"), "--home", home}
		}, exitTimeout, "runtimeguard status: gave up: --module " + "MNT/agent/run_agent.py did not answer within 5s", ""},
		{"check, module through the mount", func(mnt, module, home string) []string {
			return []string{"check", "--module", filepath.Join(mnt, "agent", "run_agent.py"), "--home", home, "--expect", strings.Repeat("0", 40)}
		}, exitTimeout, "runtimeguard check: gave up: --module MNT/agent/run_agent.py did not answer", ""},
		{"watch, module through the mount", func(mnt, module, home string) []string {
			return []string{"watch", "--module", filepath.Join(mnt, "agent", "run_agent.py"), "--home", home}
		}, exitTimeout, "runtimeguard watch: gave up: --module MNT/agent/run_agent.py did not answer", ""},
		{"update, module through the mount", func(mnt, module, home string) []string {
			return []string{"update", "--module", filepath.Join(mnt, "agent", "run_agent.py"), "--home", home, "--", "true"}
		}, exitTimeout, "runtimeguard update: gave up: --module MNT/agent/run_agent.py did not answer", ""},
		{"update, the receipts' directory through a link into the mount", func(mnt, module, home string) []string {
			if err := os.Symlink(mnt, filepath.Join(home, "logs")); err != nil {
				panic(err)
			}
			return []string{"update", "--module", module, "--home", home, "--", "true"}
		}, exitTimeout, "runtimeguard update: gave up: --receipt logs/update_receipts/latest.json: its directory ", ""},
		{"update, home on the mount", func(mnt, module, home string) []string {
			return []string{"update", "--module", module, "--home", mnt, "--", "true"}
		}, exitTimeout, "runtimeguard update: gave up: --home MNT did not answer within 5s", ""},
		{"check, home on the mount", func(mnt, module, home string) []string {
			return []string{"check", "--module", module, "--home", mnt, "--expect", strings.Repeat("0", 40)}
		}, exitTimeout, "runtimeguard: bind ", ""},
		{"watch, home on the mount", func(mnt, module, home string) []string {
			return []string{"watch", "--module", module, "--home", mnt}
		}, exitTimeout, "read timed out", ""},
		{"status, home on the mount", func(mnt, module, home string) []string {
			return []string{"status", "--module", module, "--home", mnt}
		}, exitTimeout, "", "guard:             not bound: bind "},
		{"status --json, home on the mount", func(mnt, module, home string) []string {
			return []string{"status", "--json", "--module", module, "--home", mnt}
		}, exitTimeout, "", `"bind_error": "runtimeguard: bind `},
		{"marker on the mount", func(mnt, module, home string) []string {
			return []string{"marker", filepath.Join(mnt, ".hermes-update-in-progress")}
		}, exitMarkerUnknown, "", "unknown: gave up: the marker MNT/.hermes-update-in-progress did not answer within 5s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			module, home, mnt, f := hungMountCase(t, func(module, _ string) map[string]string {
				return map[string]string{"agent": filepath.Dir(module)}
			})
			f.Hang()
			cmd := commandProcess(tc.args(mnt, module, home)...)
			cmd.Env = append(cmd.Env, gittest.Env...)
			var stdout, stderr gittest.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			took, err := endsOnAHungMount(t, cmd, f, 6*readTimeout, func() string { return stdout.String() + stderr.String() }, nil)
			// One read timeout, not two in a row: a bound on how many it
			// waits, not on speed.
			assert.Less(t, took, 2*readTimeout, "the command waited for the hung file system more than once")
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.code, code, "stdout %q, stderr %q", stdout.String(), stderr.String())
			assert.Contains(t, stderr.String(), strings.ReplaceAll(tc.stderr, "MNT", mnt))
			assert.Contains(t, stdout.String(), strings.ReplaceAll(tc.stdout, "MNT", mnt))
		})
	}
}

// A command started in a directory reached through a mount that stopped
// answering ($PWD, which os.Getwd stats first) with a path flag relative to
// it gives up within one read timeout, saying so, where it waited for good.
func TestCommandsGiveUpOnAHungWorkingDirectory(t *testing.T) {
	t.Parallel() // processes, files and mounts of its own
	for _, args := range [][]string{
		{"status", "--python", "venv/bin/python"},
		{"update", "--python", "venv/bin/python", "--", "true"},
		{"check", "--python", "venv/bin/python", "--expect", strings.Repeat("0", 40)},
		{"status", "HERMES_HOME=relhome"}, // no --home: the variable's, relative
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			module, home, mnt, f := hungMountCase(t, func(module, _ string) map[string]string {
				return map[string]string{"agent": filepath.Dir(module)}
			})
			resume := filepath.Join(gittest.TempDir(t), "resume")
			full := append([]string{args[0], "--module", module, "--home", home}, args[1:]...)
			var env []string
			if v, ok := strings.CutPrefix(args[len(args)-1], "HERMES_HOME="); ok {
				full, env = []string{args[0], "--module", module}, []string{"HERMES_HOME=" + v}
			}
			self := commandProcess(full...)
			// The shell enters the directory through the mount, then waits
			// for the mount to hang before it runs the command there.
			script := `cd "$1" && while [ ! -e "$2" ]; do sleep 0.01; done; shift 2; exec "$@"`
			cmd := exec.Command("sh", append([]string{"-c", script, "sh", filepath.Join(mnt, "agent"), resume}, self.Args...)...)
			cmd.Env = append(append(self.Env, gittest.Env...), env...)
			var stdout, stderr gittest.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			// The shell is in the directory once it waits for resume.
			require.Eventually(t, func() bool {
				cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", cmd.Process.Pid))
				return err == nil && cwd == filepath.Dir(module)
			}, 30*time.Second, 5*time.Millisecond)
			f.Hang()
			require.NoError(t, os.WriteFile(resume, nil, 0o644))
			took, err := endsOnAHungMount(t, cmd, f, 6*readTimeout, func() string { return stderr.String() }, nil)
			assert.Less(t, took, 2*readTimeout, "stderr %q", stderr.String())
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "stderr %q", stderr.String())
			assert.Equal(t, exitTimeout, ee.ExitCode(), "stdout %q, stderr %q", stdout.String(), stderr.String())
			assert.Contains(t, stderr.String(), "gave up: the working directory did not answer within 5s")
		})
	}
}

// A home that stops answering while COMMAND runs, or a directory on PATH
// that does not answer as COMMAND is looked for, holds update up for a
// bounded time, never for good: it gives up with the timeout's exit code,
// naming what did not answer. Its locks are free at once, though the
// process cannot end while the mount hangs (a thread of it waits on FUSE);
// the receipt the home last took stays "running", naming a writer that is
// gone.
func TestUpdateGivesUpOnAHomeThatHangsWhileItsCommandRuns(t *testing.T) {
	t.Parallel() // processes, files and mounts of its own
	for _, tc := range []struct {
		name string
		// hangs: the home on the mount, hung while COMMAND runs; else a
		// directory of PATH on it, hung from the start.
		home   bool
		stderr string // after "runtimeguard update: gave up: "; MNT the mount
		within time.Duration
	}{
		// The reads after COMMAND give up within one read timeout, and
		// the writes within another: a bound on a hang, not on speed.
		{"home, while COMMAND runs", true, "the receipts' directory MNT/home/logs/update_receipts", 3 * readTimeout},
		{"PATH, as COMMAND is looked for", false, "the command sh (in ", 2 * readTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			module, home, mnt, f := hungMountCase(t, func(_, home string) map[string]string {
				return map[string]string{"home": home, "bin": "/usr/bin"}
			})
			signals := gittest.TempDir(t)
			started, resume := filepath.Join(signals, "started"), filepath.Join(signals, "resume")
			script := "touch " + started + "; while [ ! -e " + resume + " ]; do sleep 0.01; done"
			homeArg := home
			if tc.home {
				homeArg = filepath.Join(mnt, "home")
			}
			cmd := commandProcess("update", "--module", module, "--home", homeArg, "--lock", "update.lock", "--", "sh", "-c", script)
			cmd.Env = append(cmd.Env, gittest.Env...)
			if !tc.home {
				cmd.Env = append(cmd.Env, "PATH="+filepath.Join(mnt, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
				f.Hang()
			}
			var stdout, stderr gittest.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			receipt := filepath.Join(home, "logs", "update_receipts", "latest.json")
			var running []byte
			if tc.home {
				require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, 30*time.Second, 5*time.Millisecond,
					"COMMAND never started: %s", stderr.String())
				var err error
				running, err = os.ReadFile(receipt)
				require.NoError(t, err)
				f.Hang()
				require.NoError(t, os.WriteFile(resume, nil, 0o644))
			}
			locksFree := func() {
				lock, err := updater.Lock("", filepath.Join(home, "update.lock"), true)
				if assert.NoError(t, err, "the layout's lock, once update gave up") {
					lock.Close()
				}
				checkoutLock := filepath.Join(filepath.Dir(module), ".git", updater.HermesCheckoutLock)
				held, err := updater.LockCheckout(checkoutLock, 0)
				if assert.NoError(t, err, "the checkout lock, once update gave up") {
					held.Close()
				}
			}
			took, err := endsOnAHungMount(t, cmd, f, 6*readTimeout, func() string { return stderr.String() }, locksFree)
			assert.Less(t, took, tc.within, "stderr %q", stderr.String())
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "stderr %q", stderr.String())
			assert.Equal(t, exitTimeout, ee.ExitCode(), "stderr %q", stderr.String())
			assert.Contains(t, stderr.String(), "runtimeguard update: gave up: "+strings.ReplaceAll(tc.stderr, "MNT", mnt))
			after, err := os.ReadFile(receipt)
			require.NoError(t, err)
			if tc.home {
				assert.Equal(t, string(running), string(after), "the receipt the home last took")
			}
			assert.Contains(t, string(after), `"outcome": "running"`)
			_, err = os.Stat(started)
			assert.Equal(t, tc.home, err == nil, "COMMAND ran")
		})
	}
}

// hungMountCase makes a checkout tracking run_agent.py (module), a home,
// and a FUSE mount at mnt serving the links that links names for them.
func hungMountCase(t *testing.T, links func(module, home string) map[string]string) (module, home, mnt string, f *fusehang.FS) {
	t.Helper()
	module, _ = checkout(t)
	home = gittest.TempDir(t)
	mnt = filepath.Join(gittest.TempDir(t), "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	return module, home, mnt, fusehang.Mount(t, mnt, links(module, home))
}

// endsOnAHungMount waits for cmd, started, to end while f hangs, and
// returns how long it ran and its Wait error. A process whose thread waits
// on the hung file system ends, but cannot be reaped until the mount is
// torn down: it is taken for ended once each of its threads has exited or
// waits on the file system (a Go process that runs has threads that do
// neither), and the mount is then torn down, after ended (if not nil) has
// looked at what the process left while the mount still hangs. A process
// still running after limit (a bound on a hang) fails the test, which
// shows output().
func endsOnAHungMount(t *testing.T, cmd *exec.Cmd, f *fusehang.FS, limit time.Duration, output func() string, ended func()) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	exited := func() bool {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", cmd.Process.Pid))
		if err != nil || len(tasks) == 0 {
			return false
		}
		for _, task := range tasks {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", cmd.Process.Pid, task.Name()))
			_, rest, _ := strings.Cut(string(stat), ") ")
			if err != nil || rest == "" || !strings.ContainsAny(rest[:1], "ZDX") {
				return false
			}
		}
		return true
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for {
		select {
		case err := <-waited:
			took := time.Since(start)
			if ended != nil {
				ended()
			}
			return took, err
		case <-time.After(time.Millisecond):
			if exited() {
				took := time.Since(start)
				if ended != nil {
					ended()
				}
				f.TearDown()
				return took, <-waited
			}
			if time.Since(start) > limit {
				_ = cmd.Process.Kill()
				f.TearDown()
				<-waited
				t.Fatalf("still running %v after it started: %q", time.Since(start), output())
			}
		}
	}
}
