package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// commandEnv makes the test binary the runtimeguard command: the tests run
// the real main in a process of its own, with no toolchain needed to build
// it (so they run under Wine too).
const commandEnv = "RUNTIMEGUARD_BE_THE_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(commandEnv) != "" {
		main()
	}
	os.Exit(m.Run())
}

// result is what one run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

// commandProcess returns the command with args, to run as a process.
func commandProcess(args ...string) *exec.Cmd {
	return gittest.Self(args, commandEnv+"=1")
}

// runCmd runs the command with args and HERMES_HOME set to home.
func runCmd(t *testing.T, home string, args ...string) result {
	t.Helper()
	cmd := commandProcess(args...)
	cmd.Env = append(cmd.Env, "HERMES_HOME="+home)
	return runProcess(t, cmd)
}

// runProcess runs cmd and returns what it did.
func runProcess(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, stdout.String(), stderr.String()}
}

// git is the shared harness's git.
var git = gittest.Git

// checkout makes a Git checkout tracking run_agent.py and returns the module
// path and HEAD.
func checkout(t *testing.T) (module, rev string) {
	t.Helper()
	return gittest.Agent(t, filepath.Join(gittest.TempDir(t), "agent"))
}

func commitChange(t *testing.T, module string) string {
	t.Helper()
	dir := filepath.Dir(module)
	require.NoError(t, os.WriteFile(module, []byte("class AIAgent: changed = True\n"), 0o644))
	git(t, dir, "commit", "-q", "-am", "change")
	return git(t, dir, "rev-parse", "HEAD")
}

func TestDemo(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	r := runCmd(t, gittest.TempDir(t), "demo")
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{
		"check before touching session state: current",
		"check: stale; the server answers HTTP 409",
		`"type": "agent_runtime_stale"`,
		`"restart_scheduled": false`,
		"update state: unverified",
		"update state incomplete",
		"no reload is planned",
		"no reload is proven safe: no update is in progress and no receipt was written since the guard bound",
		"the 409 says restart_scheduled: true",
		"check: current",
	} {
		assert.Contains(t, r.stdout, want)
	}
	assert.Empty(t, r.stderr, "the library's log lines (stale, reloaded) are not the demo's")
}

func TestCheck(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	home := gittest.TempDir(t)
	module, rev := checkout(t)
	r := runCmd(t, home, "check", "--module", module, "--expect", rev)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, rev+"\n", r.stdout)

	moved := commitChange(t, module)
	r = runCmd(t, home, "check", "--module", module, "--expect", rev)
	assert.Equal(t, 3, r.code, r.stderr)
	assert.Equal(t, `{"error":"Hermes Agent was updated on disk after Hermes WebUI loaded it. Restart Hermes WebUI manually to load the new code.","type":"agent_runtime_stale","retryable":true,"restart_scheduled":false,"agent_update_state":"unverified"}`+"\n", r.stdout)

	// The update state reflects the home given.
	require.NoError(t, os.WriteFile(filepath.Join(home, ".hermes-update-in-progress"), []byte(fmt.Sprintf("%d\n%d\n", os.Getpid(), time.Now().Unix())), 0o644))
	r = runCmd(t, gittest.TempDir(t), "check", "--module", module, "--expect", rev, "--home", home)
	assert.Equal(t, 3, r.code)
	assert.Contains(t, r.stdout, `"agent_update_state":"active"`)

	r = runCmd(t, home, "check", "--module", module, "--expect", moved, "--repeat", "1000")
	assert.Equal(t, 0, r.code, r.stderr)
}

func TestCheckUsage(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	module, rev := checkout(t)
	for _, args := range [][]string{
		{"check"},
		{"check", "--module", module},
		{"check", "--expect", rev},
		{"check", "--module", module, "--expect", rev, "extra"},
		{"check", "--bogus"},
		{"check", "--module", module, "--expect", rev, "--repeat", "-1"},
		{"check", "--module", module, "--expect", rev, "--repeat", "0"},
		{"status", "--module", module, "--marker", "../../etc/passwd"},
		{"status", "--module", module, "--marker", ""},
		{"check", "--module", module, "--expect", rev, "--recovery", "a/b"},
		{"frobnicate"},
		{},
	} {
		r := runCmd(t, gittest.TempDir(t), args...)
		assert.Equal(t, 2, r.code, "runtimeguard %v", args)
		assert.Contains(t, r.stderr, "runtimeguard", "runtimeguard %v", args)
		assert.Contains(t, strings.ToLower(r.stderr), "usage", "runtimeguard %v: a hint", args)
		assert.Empty(t, r.stdout)
	}
	// A short revision is a usage error naming the flag.
	r := runCmd(t, gittest.TempDir(t), "check", "--module", module, "--expect", rev[:7])
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--expect")
	assert.Contains(t, r.stderr, "not a full hex object id")
	r = runCmd(t, gittest.TempDir(t), "check", "--module", filepath.Join(gittest.TempDir(t), "missing.py"), "--expect", rev)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "missing.py: no such file")
}

// A module that is in no tracked checkout cannot be checked against a
// revision: an error that says so, not a stale body.
func TestCheckOfModuleOutsideGit(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	dir := gittest.TempDir(t)
	module := filepath.Join(dir, "run_agent.py")
	require.NoError(t, os.WriteFile(module, []byte("x\n"), 0o644))
	r := runCmd(t, dir, "check", "--module", module, "--expect", strings.Repeat("a", 40))
	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "not in a tracked Git checkout")
}

// Help goes to standard output with exit 0, for the tool and for every
// command; a command without flags prints no empty "Flags:" header.
func TestHelp(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	for _, cmd := range []string{"demo", "status", "check", "marker", "watch", "update", "version"} {
		for _, flag := range []string{"-h", "--help"} {
			r := runCmd(t, gittest.TempDir(t), cmd, flag)
			assert.Equal(t, 0, r.code, "%s %s", cmd, flag)
			assert.Contains(t, r.stdout, "Usage: runtimeguard "+cmd, "%s %s", cmd, flag)
			assert.Empty(t, r.stderr, "%s %s", cmd, flag)
		}
	}
	r := runCmd(t, gittest.TempDir(t), "help", "status")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "Usage: runtimeguard status", "help COMMAND is COMMAND's help")
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := runCmd(t, gittest.TempDir(t), args...)
		assert.Equal(t, 0, r.code)
		assert.Contains(t, r.stdout, "runtimeguard status --module FILE")
	}
	// --help and -h take a command as help does, and no more.
	for _, flag := range []string{"help", "-h", "--help"} {
		r = runCmd(t, gittest.TempDir(t), flag, "status")
		assert.Equal(t, 0, r.code, "%s status", flag)
		assert.Contains(t, r.stdout, "Usage: runtimeguard status", "%s status is status's help", flag)
		r = runCmd(t, gittest.TempDir(t), flag, "status", "extra")
		assert.Equal(t, 2, r.code, "%s status extra", flag)
		assert.Empty(t, r.stdout)
		assert.Contains(t, r.stderr, "at most one command")
		r = runCmd(t, gittest.TempDir(t), flag, "bogus")
		assert.Equal(t, 2, r.code, "%s bogus", flag)
		assert.Contains(t, r.stderr, `unknown command "bogus"`)
	}
	// A command's help says how it exits, as the command's documentation does.
	for cmd, want := range map[string]string{"check": "3 when stale", "status": "1 when the checkout cannot be read", "marker": "4 active", "watch": "0 once stopped"} {
		r = runCmd(t, gittest.TempDir(t), cmd, "--help")
		assert.Contains(t, strings.Join(strings.Fields(r.stdout), " "), want, "%s --help", cmd)
	}
	r = runCmd(t, gittest.TempDir(t), "version", "-h")
	assert.NotContains(t, r.stdout, "Flags:")
	// A flag error goes to standard error with a pointer to the usage,
	// exit 2.
	r = runCmd(t, gittest.TempDir(t), "status", "--bogus")
	assert.Equal(t, 2, r.code)
	assert.Empty(t, r.stdout)
	assert.Equal(t, "runtimeguard status: unknown flag --bogus\nRun 'runtimeguard status --help' for usage.\n", r.stderr)
}

func TestVersion(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	r := runCmd(t, gittest.TempDir(t), "version")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^runtimeguard \S+.* go1\.\d+.* \w+/\w+\n$`, r.stdout)
}

// The marker command says the state and why, in words or as JSON.
func TestMarker(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	dir := gittest.TempDir(t)
	path := filepath.Join(dir, "marker")
	r := runCmd(t, dir, "marker", path)
	assert.Equal(t, result{0, "absent: no file\n", ""}, r)
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf("%d\n%d\n", os.Getpid(), time.Now().Unix())), 0o644))
	assert.Equal(t, fmt.Sprintf("active: process %d is alive\n", os.Getpid()), runCmd(t, dir, "marker", path).stdout)
	require.NoError(t, os.WriteFile(path, []byte("garbage"), 0o644))
	assert.Equal(t, "unknown: not a process ID and a time on two lines of UTF-8\n", runCmd(t, dir, "marker", path).stdout)
	assert.Equal(t, 2, runCmd(t, dir, "marker").code)
	assert.Equal(t, 2, runCmd(t, dir, "marker", "a", "b").code)
	r = runCmd(t, dir, "marker", "")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "PATH is empty")

	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Mkdir(path, 0o755))
	r = runCmd(t, dir, "marker", "--json", path)
	require.Equal(t, exitMarkerUnknown, r.code, r.stderr)
	var m map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m))
	assert.Equal(t, map[string]string{"path": path, "state": "unknown", "reason": "a directory"}, m)

	// Flags may follow the path; after "--" a name that starts with a dash
	// is a path.
	r2 := runCmd(t, dir, "marker", path, "--json")
	assert.Equal(t, r, r2)
	dash := filepath.Join(dir, "-json")
	require.NoError(t, os.Mkdir(dash, 0o755))
	cmd := commandProcess("marker", "--json", "--", "-json")
	cmd.Dir = dir
	r = runProcess(t, cmd)
	require.Equal(t, exitMarkerUnknown, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m))
	assert.Equal(t, map[string]string{"path": "-json", "state": "unknown", "reason": "a directory"}, m)
	assert.Equal(t, 2, runCmd(t, dir, "marker", path, "--bogus").code)
	assert.Equal(t, 2, runCmd(t, dir, "marker", path, "--json", "b").code)
	assert.Equal(t, 2, runCmd(t, dir, "marker", "--", path, "b").code)
}

// status on a module the index does not track still names the ref HEAD is
// on, and outside any repository it names no object format.
func TestStatusOfUntrackedAndNonGitModules(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	module, _ := checkout(t)
	untracked := filepath.Join(filepath.Dir(module), "untracked.py")
	require.NoError(t, os.WriteFile(untracked, []byte("x\n"), 0o644))
	r := runCmd(t, gittest.TempDir(t), "status", "--module", untracked)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^HEAD:\s+refs/heads/main$`, r.stdout)
	assert.Contains(t, r.stdout, "not tracked")

	outside := filepath.Join(gittest.TempDir(t), "run_agent.py")
	require.NoError(t, os.WriteFile(outside, []byte("x\n"), 0o644))
	r = runCmd(t, gittest.TempDir(t), "status", "--module", outside, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, "", s["object_format"])
	assert.Equal(t, "", s["head_ref"])
}

// status on a linked worktree whose HEAD cannot be read says so, rather
// than calling HEAD detached.
func TestStatusOfUnreadableHead(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	module, _ := checkout(t)
	linked := filepath.Join(gittest.TempDir(t), "linked")
	git(t, filepath.Dir(module), "worktree", "add", "-q", linked)
	gitDir := git(t, linked, "rev-parse", "--absolute-git-dir")
	require.NoError(t, os.Remove(filepath.Join(gitDir, "HEAD")))
	require.NoError(t, os.Mkdir(filepath.Join(gitDir, "HEAD"), 0o755))
	r := runCmd(t, gittest.TempDir(t), "status", "--module", filepath.Join(linked, filepath.Base(module)))
	assert.Equal(t, 1, r.code, "a checkout that cannot be read is an error")
	assert.Regexp(t, `(?m)^HEAD:\s+unreadable$`, r.stdout)
	assert.Regexp(t, `(?m)^revision:\s+unreadable: .*HEAD is a directory`, r.stdout)
	assert.Contains(t, r.stderr, "HEAD is a directory")
	r = runCmd(t, gittest.TempDir(t), "status", "--json", "--module", filepath.Join(linked, filepath.Base(module)))
	assert.Equal(t, 1, r.code)
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), "the JSON is printed all the same")
	assert.Contains(t, s["read_error"], "HEAD is a directory")
}

func TestStatusJSON(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	home := gittest.TempDir(t)
	module, rev := checkout(t)
	r := runCmd(t, home, "status", "--module", module, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	dir, err := filepath.EvalSymlinks(filepath.Dir(module))
	require.NoError(t, err)
	assert.Equal(t, rev, s["revision"])
	assert.Equal(t, true, s["tracked"])
	assert.Equal(t, dir, s["source_dir"])
	assert.Equal(t, dir, s["top_level"])
	assert.Equal(t, "refs/heads/main", s["head_ref"])
	assert.Equal(t, "sha1", s["object_format"])
	assert.Equal(t, "absent", s["update_marker"])
	assert.Equal(t, "unverified", s["update_state"])
	assert.Equal(t, filepath.Join(home, ".hermes-update-in-progress"), s["marker_path"])
	assert.Equal(t, []any{dir}, s["install_roots"])
	assert.Equal(t, []any{}, s["recovery_markers"])
	assert.NotContains(t, s, "reason")

	require.NoError(t, os.WriteFile(filepath.Join(dir, ".lazy-refresh-incomplete"), nil, 0o644))
	r = runCmd(t, home, "status", "--module", module, "--json")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, "incomplete", s["update_state"])
	assert.Equal(t, []any{filepath.Join(dir, ".lazy-refresh-incomplete")}, s["recovery_markers"])
}

func TestStatusExplainsEmptyRevision(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	dir := gittest.TempDir(t)
	module := filepath.Join(dir, "run_agent.py")
	require.NoError(t, os.WriteFile(module, []byte("x\n"), 0o644))
	r := runCmd(t, dir, "status", "--module", module)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "no Git worktree holds")
	assert.Regexp(t, `(?m)^identified by:\s+file$`, r.stdout, "a guard bound here identifies the install by its file")

	r = runCmd(t, dir, "status", "--module", module, "--json")
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, "", s["revision"])
	assert.Contains(t, s["reason"], "no Git worktree")
	assert.Equal(t, "file", s["identified_by"])
	assert.NotContains(t, s, "build")

	const build = "cccccccccccccccccccccccccccccccccccccccc"
	require.NoError(t, os.WriteFile(filepath.Join(dir, gittest.StampFile), []byte(gittest.Stamp(build, nil)), 0o644))
	r = runCmd(t, dir, "status", "--module", module)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^identified by:\s+build stamp, build `+build+`$`, r.stdout)
	r = runCmd(t, dir, "status", "--module", module, "--json")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, "build stamp", s["identified_by"])
	assert.Equal(t, build, s["build"])
	assert.Equal(t, "", s["revision"], "revision is Git's")

	checkoutModule, _ := checkout(t)
	r = runCmd(t, dir, "status", "--module", checkoutModule, "--json")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, "git", s["identified_by"])

	r = runCmd(t, dir, "status", "--module", filepath.Join(dir, "missing.py"))
	assert.Equal(t, 2, r.code)
	assert.Empty(t, r.stdout)
}

// status says how a guard identifies the install only where one binds:
// HEAD naming a branch that does not exist while others do (a rename
// under way) is a checkout New refuses to bind.
func TestStatusOfUnbornBranchAmongOthers(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	module, rev := checkout(t)
	git(t, filepath.Dir(module), "symbolic-ref", "HEAD", "refs/heads/gone")
	home := gittest.TempDir(t)
	r := runCmd(t, home, "check", "--module", module, "--expect", rev)
	require.Equal(t, exitError, r.code, "no guard binds here: %s", r.stderr)
	r = runCmd(t, home, "status", "--module", module)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `(?m)^revision:\s+none: HEAD names the unborn branch refs/heads/gone \(a guard does not bind here: .*refs/heads/gone.*\)$`, r.stdout)
	assert.NotContains(t, r.stdout, "identified by")
}

func TestWatchPrintsChangesAndStopsOnSignal(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	module, rev := checkout(t)
	home := gittest.TempDir(t)
	cmd := commandProcess("watch", "--module", module, "--home", home, "--interval", "20ms")
	next := startLines(t, cmd)
	assert.Contains(t, next(), "bound")
	assert.Contains(t, next(), "current "+rev)
	moved := commitChange(t, module)
	assert.Contains(t, next(), "stale "+moved+" update_state=unverified")

	// Every change after it, each once: current again, moved again, moved
	// elsewhere, the update state.
	dir := filepath.Dir(module)
	git(t, dir, "reset", "-q", "--hard", rev)
	assert.Contains(t, next(), " current "+rev)
	git(t, dir, "reset", "-q", "--hard", moved)
	assert.Contains(t, next(), " stale "+moved+" update_state=unverified")
	again := gittest.Commit(t, dir, "run_agent.py", "class AIAgent: changed = 2\n")
	assert.Contains(t, next(), " stale "+again+" update_state=unverified")
	gittest.WriteMarker(t, filepath.Join(home, ".hermes-update-in-progress"), os.Getpid(), time.Now())
	assert.Contains(t, next(), " stale update_state=active")
	git(t, dir, "reset", "-q", "--hard", rev)
	assert.Contains(t, next(), " current "+rev)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.Contains(t, next(), "stopped", "nothing printed twice")
	require.NoError(t, cmd.Wait(), "watch exits 0 on SIGTERM")
}

// check and watch print their own lines only: the library's log lines (a
// stale runtime, current again, an install identified without Git) are
// not interleaved with them, on either stream (the demo's: TestDemo).
func TestCheckAndWatchPrintNoLibraryLog(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	home := gittest.TempDir(t)
	module, rev := checkout(t)
	moved := commitChange(t, module)
	r := runCmd(t, home, "check", "--module", module, "--expect", rev)
	assert.Equal(t, exitStale, r.code)
	assert.Equal(t, "runtimeguard check: stale: loaded "+rev+", the checkout is now at "+moved+"\n", r.stderr)

	outside := filepath.Join(gittest.TempDir(t), "run_agent.py") // in no checkout: bound without Git
	require.NoError(t, os.WriteFile(outside, []byte("x\n"), 0o644))
	for _, m := range []string{module, outside} {
		cmd := commandProcess("watch", "--module", m, "--home", home, "--interval", "20ms")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		next := startLines(t, cmd)
		assert.Contains(t, next(), "bound")
		assert.Contains(t, next(), "current")
		dir := filepath.Dir(module)
		if m == module {
			git(t, dir, "reset", "-q", "--hard", rev)
			assert.Contains(t, next(), " stale "+rev)
			git(t, dir, "reset", "-q", "--hard", moved)
			assert.Contains(t, next(), " current "+moved)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		assert.Contains(t, next(), "stopped")
		require.NoError(t, cmd.Wait())
		assert.Empty(t, stderr.String(), "watch --module %s", m)
	}
}

// startLines starts cmd and returns what reads its next line of output
// (see lineReader).
func startLines(t *testing.T, cmd *exec.Cmd) func() string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	return lineReader(t, stdout)
}

// lineReader returns what reads the next line of r, failing the test if
// r ends first or gives nothing for 30 s.
func lineReader(t *testing.T, r io.Reader) func() string {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the command ended early")
			return l
		case <-time.After(30 * time.Second):
			t.Fatal("the command printed nothing")
			return ""
		}
	}
}

// watch of an install without Git watches it by its file and its build
// stamp: a line says so at binding, and a stamp naming another build, or
// another file renamed over the module, is a move. (In process, stopped
// by its context: a signal is not to be had everywhere.)
func TestWatchOfAnInstallWithoutGit(t *testing.T) {
	t.Parallel() // files of its own
	const a, b = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	watch := func(t *testing.T, module string, args ...string) (next func() string, stop func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		r, w := io.Pipe()
		code := make(chan int, 1)
		argv := append([]string{"watch", "--module", module, "--home", gittest.TempDir(t), "--interval", "20ms"}, args...)
		go func() {
			var stderr strings.Builder
			code <- run(ctx, argv, w, &stderr)
			w.Close()
		}()
		next = lineReader(t, r)
		stop = func() {
			t.Helper()
			cancel()
			assert.Contains(t, next(), "stopped")
			assert.Equal(t, exitOK, <-code, "watch exits 0 once stopped")
		}
		return next, stop
	}

	dir := filepath.Join(gittest.TempDir(t), "agent")
	module := gittest.Install(t, dir, a)
	next, stop := watch(t, module, "--json")
	var bound map[string]any
	require.NoError(t, json.Unmarshal([]byte(next()), &bound))
	assert.Equal(t, "bound", bound["event"])
	assert.Equal(t, "build stamp", bound["identified_by"])
	assert.Equal(t, a, bound["revision"])
	assert.Contains(t, next(), `"current"`)
	gittest.Replace(t, filepath.Join(dir, gittest.StampFile), gittest.Stamp(b, nil))
	var stale map[string]any
	require.NoError(t, json.Unmarshal([]byte(next()), &stale))
	assert.Equal(t, "stale", stale["event"])
	assert.Equal(t, b, stale["current"])
	stop()

	other := gittest.Install(t, filepath.Join(gittest.TempDir(t), "agent"), "")
	next, stop = watch(t, other)
	assert.Regexp(t, `bound .* at none \(no Git checkout: identified by its file\)$`, next())
	assert.Contains(t, next(), "current none")
	gittest.Replace(t, other, "class AIAgent: replaced = True\n")
	assert.Contains(t, next(), "stale")
	stop()
}

// status on a checkout whose index cannot be read says whether the index
// tracks the module is unknown, rather than that it does not; where the
// index was read, what it says.
func TestStatusOfUnreadableIndex(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	module, _ := checkout(t)
	dir := filepath.Dir(module)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "index"), []byte("DIRC garbage"), 0o644))
	r := runCmd(t, gittest.TempDir(t), "status", "--module", module)
	assert.Equal(t, exitError, r.code, r.stderr)
	assert.Regexp(t, `(?m)^tracked:\s+unknown: the index was not read$`, r.stdout)

	module, _ = checkout(t)
	dir = filepath.Dir(module)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", "main"), []byte("garbage\n"), 0o644))
	r = runCmd(t, gittest.TempDir(t), "status", "--module", module)
	assert.Equal(t, exitError, r.code, r.stderr)
	assert.Regexp(t, `(?m)^tracked:\s+true$`, r.stdout, "the index was read before the ref")
}

// A checkout that cannot be read is still described, with its recovery
// markers, and the read error; the exit status is 1.
func TestStatusOfUnreadableCheckout(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	module, _ := checkout(t)
	dir := filepath.Dir(module)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", "main"), []byte("garbage\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".update-incomplete"), nil, 0o644))
	r := runCmd(t, gittest.TempDir(t), "status", "--module", module, "--json")
	require.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "not a ref")
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Contains(t, s["read_error"], filepath.Join("refs", "heads", "main"))
	assert.Equal(t, "", s["revision"])
	assert.Equal(t, "incomplete", s["update_state"])
	assert.Len(t, s["recovery_markers"], 1)
}

// updateCase is a checkout with an upstream one commit ahead, and a home
// for the updater's files.
type updateCase struct {
	module, dir, upstream, home string
	loaded, ahead               string
}

func newUpdateCase(t *testing.T) *updateCase {
	t.Helper()
	tmp := gittest.TempDir(t)
	c := &updateCase{upstream: filepath.Join(tmp, "upstream"), dir: filepath.Join(tmp, "agent"), home: filepath.Join(tmp, "home")}
	_, c.loaded = gittest.Agent(t, c.upstream)
	git(t, tmp, "clone", "-q", c.upstream, c.dir)
	c.module = filepath.Join(c.dir, "run_agent.py")
	c.ahead = gittest.Commit(t, c.upstream, "run_agent.py", "class AIAgent: revision = 2\n")
	require.NoError(t, os.Mkdir(c.home, 0o755))
	return c
}

// receipt reads and decodes the latest receipt.
func (c *updateCase) receipt(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.home, "logs", "update_receipts", "latest.json"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m), "%s", data)
	return m
}

func (c *updateCase) update(t *testing.T, argv ...string) result {
	t.Helper()
	args := append([]string{"update", "--module", c.module, "--home", c.home, "--lock", "update.lock", "--wait", "200ms", "--"}, argv...)
	cmd := commandProcess(args...)
	cmd.Dir = c.dir
	cmd.Env = append(cmd.Env, gittest.Env...)
	return runProcess(t, cmd)
}

// A successful update leaves a success receipt for the new HEAD, durable
// copies of it, no marker, and the lock free.
func TestUpdateSuccess(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	r := c.update(t, "git", "pull", "-q", "--ff-only")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "success: "+c.loaded+" -> "+c.ahead)
	m := c.receipt(t)
	assert.Equal(t, float64(1), m["schema"])
	assert.Equal(t, "success", m["outcome"])
	assert.Equal(t, map[string]any{"sha": c.loaded}, m["pre_update"])
	assert.Equal(t, map[string]any{"sha": c.ahead}, m["post_update"])
	assert.NotEmpty(t, m["finished_at"])
	runs, err := filepath.Glob(filepath.Join(c.home, "logs", "update_receipts", "update_*_"+m["update_id"].(string)+".json"))
	require.NoError(t, err)
	assert.Len(t, runs, 1, "the run's own receipt")
	assert.NoFileExists(t, filepath.Join(c.home, ".hermes-update-in-progress"))
}

// A failing command, or a recovery marker left behind, is a failed
// receipt; the tool exits with the command's status.
func TestUpdateFailure(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	r := c.update(t, "sh", "-c", "git pull -q --ff-only && exit 7")
	assert.Equal(t, 7, r.code)
	assert.Equal(t, "failed", c.receipt(t)["outcome"])
	assert.Contains(t, r.stderr, "exited 7")
	assert.NoFileExists(t, filepath.Join(c.home, ".hermes-update-in-progress"))

	r = c.update(t, "sh", "-c", "touch .update-incomplete")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, "failed", c.receipt(t)["outcome"])
	assert.Contains(t, r.stderr, ".update-incomplete")

	// An install root that cannot be searched (a file where the
	// interpreter's venv would be) may hold a recovery marker: the update
	// is not proven, though its command succeeded, and status says why.
	require.NoError(t, os.Remove(filepath.Join(c.dir, ".update-incomplete")))
	root := filepath.Join(gittest.TempDir(t), "install")
	require.NoError(t, os.WriteFile(root, nil, 0o644))
	python := filepath.Join(root, "venv", "bin", "python")
	args := []string{"update", "--module", c.module, "--home", c.home, "--python", python, "--", "git", "pull", "-q", "--ff-only"}
	cmd := commandProcess(args...)
	cmd.Env = append(cmd.Env, gittest.Env...)
	r = runProcess(t, cmd)
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Equal(t, "failed", c.receipt(t)["outcome"])
	assert.Contains(t, r.stderr, "the recovery markers cannot all be looked for after the update: ")
	assert.Contains(t, r.stderr, root)
	r = runCmd(t, c.home, "status", "--module", c.module, "--home", c.home, "--python", python)
	assert.Contains(t, r.stdout, "recovery markers:  cannot all be looked for: ", r.stdout)
	r = runCmd(t, c.home, "status", "--json", "--module", c.module, "--home", c.home, "--python", python)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
	assert.Contains(t, st["recovery_problem"], root)

	// A relative --python and a COMMAND that removes the directory the
	// tool was started in: the install root is still searched after it,
	// and its recovery marker fails the update.
	tmp := gittest.TempDir(t)
	gittest.WriteFile(t, filepath.Join(tmp, "install", "venv", "bin", "python"), "")
	gittest.WriteFile(t, filepath.Join(tmp, "install", ".update-incomplete"), "")
	started := filepath.Join(tmp, "started")
	require.NoError(t, os.Mkdir(started, 0o755))
	cmd = commandProcess("update", "--module", c.module, "--home", c.home, "--python", filepath.Join("..", "install", "venv", "bin", "python"), "--", "rmdir", started)
	cmd.Dir = started
	cmd.Env = append(cmd.Env, gittest.Env...)
	r = runProcess(t, cmd)
	assert.Equal(t, 1, r.code, r.stderr)
	assert.Equal(t, "failed", c.receipt(t)["outcome"])
	assert.Contains(t, r.stderr, filepath.Join(tmp, "install", ".update-incomplete"))
}

// A relative --module with ".." after a symbolic link names what the
// system resolves from the working directory (the parent of the link's
// target), not the text cleaned, whatever other path flag is relative: the
// command runs in that checkout, and status reads it.
func TestUpdateModuleThroughALinkAndDotDot(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	tmp := gittest.TempDir(t)
	repo := filepath.Join(tmp, "repo")
	gittest.Init(t, repo, map[string]string{"pkg/mod.py": "x = 1\n"})
	gittest.Init(t, filepath.Join(tmp, "pkg"), map[string]string{"mod.py": "x = 2\n"}) // the text cleaned would name this one
	require.NoError(t, os.Symlink(filepath.Join(repo, "pkg"), filepath.Join(tmp, "link")))
	require.NoError(t, os.Mkdir(filepath.Join(tmp, "home"), 0o755))
	module := "link/../pkg/mod.py" // not filepath.Join, which cleans it
	run := func(args ...string) result {
		cmd := commandProcess(args...)
		cmd.Dir = tmp
		cmd.Env = append(cmd.Env, gittest.Env...)
		return runProcess(t, cmd)
	}
	r := run("update", "--module", module, "--home", "home", "--", "sh", "-c", "pwd -P")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, repo, strings.TrimSpace(r.stdout), "the directory COMMAND ran in")
	r = run("status", "--module", module, "--home", "home")
	assert.Contains(t, r.stdout, "worktree:          "+repo+"\n")
}

// A --wait past any duration is a wait like another: update waits for the
// lock another process holds, then runs.
func TestUpdateWaitOfAnyLength(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	lock, err := updater.Lock("", filepath.Join(c.home, "update.lock"), true)
	require.NoError(t, err)
	go func() { time.Sleep(300 * time.Millisecond); lock.Close() }()
	cmd := commandProcess("update", "--module", c.module, "--home", c.home, "--lock", "update.lock", "--wait", "2562047h47m16s", "--", "true")
	cmd.Env = append(cmd.Env, gittest.Env...)
	r := runProcess(t, cmd)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "success", c.receipt(t)["outcome"])
}

// The command runs in the module's worktree, wherever the tool is run.
func TestUpdateRunsInTheWorktree(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	args := []string{"update", "--module", c.module, "--home", c.home, "--", "git", "pull", "-q", "--ff-only"}
	cmd := commandProcess(args...)
	cmd.Dir = gittest.TempDir(t) // not the checkout
	cmd.Env = append(cmd.Env, gittest.Env...)
	r := runProcess(t, cmd)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, c.ahead, git(t, c.dir, "rev-parse", "HEAD"))
	assert.Equal(t, "success", c.receipt(t)["outcome"])
}

// Another live updater's marker, or the lock held, refuses the update
// before anything runs or is written.
func TestUpdateRefuses(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	marker := filepath.Join(c.home, ".hermes-update-in-progress")
	require.NoError(t, os.MkdirAll(c.home, 0o755))
	require.NoError(t, os.WriteFile(marker, []byte(fmt.Sprintf("%d\n%d\n", os.Getpid(), time.Now().Unix())), 0o644))
	r := c.update(t, "git", "pull", "-q", "--ff-only")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "another updater is running")
	assert.NoFileExists(t, filepath.Join(c.home, "logs", "update_receipts", "latest.json"))
	assert.Equal(t, c.loaded, git(t, c.dir, "rev-parse", "HEAD"), "the command did not run")
	require.NoError(t, os.Remove(marker))

	lock, err := updater.Lock("", filepath.Join(c.home, "update.lock"), false)
	require.NoError(t, err, "a reload plan's shared lock")
	r = c.update(t, "git", "pull", "-q", "--ff-only")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "holds")
	require.NoError(t, lock.Close())
	r = c.update(t, "git", "pull", "-q", "--ff-only")
	assert.Equal(t, 0, r.code, r.stderr)
}

// A module path that leads nowhere or outside Git, or a --dir that is no
// directory, is refused before anything runs or is written (a usage error,
// or for a module in no worktree an error): a typo must not run git pull
// wherever the tool was started.
func TestUpdateRefusesBadInput(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	c := newUpdateCase(t)
	ran := filepath.Join(gittest.TempDir(t), "ran")
	outside := filepath.Join(gittest.TempDir(t), "run_agent.py")
	require.NoError(t, os.WriteFile(outside, []byte("x\n"), 0o644))
	missing := filepath.Join(gittest.TempDir(t), "typo", "home")
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"typo", []string{"--module", filepath.Join(c.dir, "run_agnet.py")}, "--module", exitUsage},
		{"outside Git", []string{"--module", outside}, "no Git worktree", exitError},
		{"missing dir", []string{"--module", c.module, "--dir", filepath.Join(c.dir, "nope")}, "--dir", exitUsage},
		{"dir is a file", []string{"--module", c.module, "--dir", c.module}, "not a directory", exitUsage},
		{"negative wait", []string{"--module", c.module, "--wait", "-1s"}, "--wait", exitUsage},
		// An empty value ("$UNSET") is no directory, not the default.
		{"empty dir", []string{"--module", c.module, "--dir", ""}, "--dir is empty", exitUsage},
		// A COMMAND named by an unset variable: nothing to run, no
		// failed receipt to write.
		{"empty command", []string{"--module", c.module, "--", ""}, "COMMAND after -- is empty", exitUsage},
		{"home is a file", []string{"--module", c.module, "--home", c.module}, "--home: " + c.module + " is not a directory", exitUsage},
		// A home that is missing is a typo: update makes none, from the
		// root down, to write its receipts in.
		{"missing home", []string{"--module", c.module, "--home", missing}, "--home " + missing + ": no such directory", exitUsage},
		{"missing home under a file", []string{"--module", c.module, "--home", filepath.Join(c.module, "home")}, "--home " + filepath.Join(c.module, "home") + ": ", exitUsage},
		{"lock in a missing directory", []string{"--module", c.module, "--lock", "run/update.lock"}, "--lock run/update.lock: ", exitUsage},
		{"marker in a missing directory", []string{"--module", c.module, "--marker", "run/marker"}, "--marker run/marker: ", exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := commandProcess(append(append([]string{"update", "--home", c.home}, tc.args...), "--", "sh", "-c", "touch "+ran)...)
			cmd.Dir = c.dir
			cmd.Env = append(cmd.Env, gittest.Env...)
			r := runProcess(t, cmd)
			assert.Equal(t, tc.code, r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.want)
			assert.NoFileExists(t, ran, "the command ran")
			assert.NoDirExists(t, filepath.Join(c.home, "logs"), "a receipt was written")
			assert.NoFileExists(t, filepath.Join(c.home, ".hermes-update-in-progress"))
			assert.NoDirExists(t, filepath.Dir(missing), "the missing home was made")
			entries, err := os.ReadDir(c.home)
			require.NoError(t, err)
			assert.Empty(t, entries, "update wrote in the home")
		})
	}
	// A home named by the variable is held to the same.
	cmd := commandProcess("update", "--module", c.module, "--", "sh", "-c", "touch "+ran)
	cmd.Dir = c.dir
	cmd.Env = append(cmd.Env, gittest.Env...)
	cmd.Env = append(cmd.Env, "HERMES_HOME="+missing)
	r := runProcess(t, cmd)
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "$HERMES_HOME "+missing+": no such directory")
	assert.NoFileExists(t, ran, "the command ran")
	assert.NoDirExists(t, filepath.Dir(missing), "the missing home was made")
}

// Without a lock file, updaters started at once run their commands one at
// a time: the checkout lock and the marker, created exclusively, exclude
// each other's runs.
func TestUpdateWithoutLockIsExclusive(t *testing.T) {
	// Serial: its updaters must start together, within the command's
	// 0.3 s, which a loaded machine may not grant.
	c := newUpdateCase(t)
	ran := filepath.Join(gittest.TempDir(t), "ran")
	// Rounds alternate: an absent marker, then a stale one; the first two
	// assert both, the others repeat them for a race.
	for round := 0; round < gittest.Repeat(10, 2); round++ {
		require.NoError(t, os.RemoveAll(ran))
		if round%2 == 1 {
			// A stale marker (its process is gone) is replaced as
			// exclusively as an absent one is created.
			gittest.WriteMarker(t, filepath.Join(c.home, ".hermes-update-in-progress"), exitedPID(t), time.Now())
		}
		var wg sync.WaitGroup
		results := make([]result, 4)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := commandProcess("update", "--module", c.module, "--home", c.home, "--", "sh", "-c", "echo start >> "+ran+"; sleep 0.3; echo end >> "+ran)
				cmd.Dir = c.dir
				cmd.Env = append(cmd.Env, gittest.Env...)
				results[i] = runProcess(t, cmd)
			}()
		}
		wg.Wait()
		data, err := os.ReadFile(ran)
		require.NoError(t, err)
		ok := 0
		for _, r := range results {
			if r.code == 0 {
				ok++
			} else {
				assert.Regexp(t, `refused: another (updater (is running|holds the marker)|update of the checkout runs)`, r.stderr)
			}
		}
		// One at a time: the checkout lock makes a later one wait out a
		// short run (as hermes update waits 3 s), or refuse.
		assert.Equal(t, strings.Repeat("start\nend\n", ok), string(data), "round %d: %+v", round, results)
		assert.GreaterOrEqual(t, ok, 1, "round %d: %+v", round, results)
	}
}

// Another updater's layout is described by flags, its home included; a
// flag that describes no layout is a usage error that names the flag.
func TestLayoutFlags(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	module, _ := checkout(t)
	home := gittest.TempDir(t)
	cmd := commandProcess("status", "--json", "--module", module, "--home-env", "PLUGINHOST_HOME",
		"--marker", "deploy.lock.pid", "--receipt", "deploys/last.json", "--recovery", ".deploy-failed")
	cmd.Env = append(cmd.Env, "PLUGINHOST_HOME="+home)
	r := runProcess(t, cmd)
	require.Equal(t, 0, r.code, r.stderr)
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, filepath.Join(home, "deploy.lock.pid"), s["marker_path"])
	assert.Equal(t, filepath.Join(home, "deploys", "last.json"), s["receipt_path"])

	// Another updater's variable, unset, is no home: not Hermes's ~/.hermes.
	r = runCmd(t, home, "update", "--module", module, "--home-env", "PLUGINHOST_HOME", "--", "git", "status")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "no home directory is known: set --home or $PLUGINHOST_HOME")

	for _, tc := range []struct{ args []string }{
		{[]string{"--marker", ""}},
		{[]string{"--receipt", "/abs/last.json"}},
		{[]string{"--lock", "../outside.lock"}},
		{[]string{"--default-home", "../x"}},
		{[]string{"--recovery", "a/b"}},
	} {
		r := runCmd(t, home, append([]string{"status", "--module", module}, tc.args...)...)
		assert.Equal(t, 2, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.args[0], "%v: the error names the flag", tc.args)
		assert.NotContains(t, r.stderr, "Layout", "%v: a CLI error speaks of flags", tc.args)
	}
}

// An update tool killed while its command runs leaves the lock held by the
// command until it ends: no other update and no reload plan can start on a
// half-run update.
func TestUpdateKilledKeepsTheLockWhileItsCommandRuns(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	if runtime.GOOS == "windows" {
		t.Skip("the command inherits the lock on Unix only")
	}
	c := newUpdateCase(t)
	tmp := gittest.TempDir(t)
	started, done := filepath.Join(tmp, "started"), filepath.Join(tmp, "done")
	cmd := commandProcess("update", "--module", c.module, "--home", c.home, "--lock", "update.lock", "--", "sh", "-c", "touch "+started+"; sleep 5; touch "+done)
	cmd.Dir = c.dir
	cmd.Env = append(cmd.Env, gittest.Env...)
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { _, err := os.Stat(started); return err == nil }, 30*time.Second, 10*time.Millisecond, "the command runs")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	lockPath := filepath.Join(c.home, "update.lock")
	_, err := updater.Lock("", lockPath, false)
	assert.ErrorIs(t, err, updater.ErrLocked, "the killed tool's command still holds the lock")
	r := c.update(t, "true")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "holds")
	require.Eventually(t, func() bool { _, err := os.Stat(done); return err == nil }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		l, err := updater.Lock("", lockPath, false)
		if err == nil {
			l.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the lock is free once the command ended")
}

// exitedPID returns the process ID of a child that has exited.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	require.NoError(t, cmd.Run())
	return cmd.ProcessState.Pid()
}

// A watch stopped at any moment ends as a stopped one, with 0: also when
// its signal comes as it begins, while it writes to a slow stdout (a pipe
// to a reader that lags), so that the guard's Watch has returned the
// context's end too by the time the command looks: a race the command
// must not lose to select's random pick.
func TestWatchStoppedAsItBeginsExitsZero(t *testing.T) {
	t.Parallel()
	module, _ := checkout(t)
	home := gittest.TempDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		stdout := &slowWriter{pause: 20 * time.Millisecond}
		var stderr strings.Builder
		code := run(ctx, []string{"watch", "--module", module, "--home", home, "--interval", "20ms"}, stdout, &stderr)
		require.Equal(t, exitOK, code, "run %d: %s", i, stderr.String())
		assert.Contains(t, stdout.String(), "stopped", "run %d", i)
	}
}

// slowWriter is a stdout whose every write takes pause.
type slowWriter struct {
	pause time.Duration
	bytes.Buffer
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.pause)
	return w.Buffer.Write(p)
}
