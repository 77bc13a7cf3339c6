package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// --version and -version print what the version command prints.
func TestVersionFlags(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	want := runCmd(t, gittest.TempDir(t), "version")
	require.Equal(t, 0, want.code, want.stderr)
	assert.Contains(t, want.stdout, "(devel)", "a test binary is built in a checkout")
	for _, flag := range []string{"--version", "-version"} {
		assert.Equal(t, want, runCmd(t, gittest.TempDir(t), flag), flag)
		// Its usage errors name the command as its usage does.
		r := runCmd(t, gittest.TempDir(t), flag, "extra")
		assert.Equal(t, exitUsage, r.code, flag)
		assert.Equal(t, "runtimeguard version: unexpected argument \"extra\"\nRun 'runtimeguard version --help' for usage.\n", r.stderr, flag)
	}
}

// marker exits by the marker's state, so that a script can branch on it,
// with or without --json.
func TestMarkerExitsByState(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	dir := gittest.TempDir(t)
	path := filepath.Join(dir, "marker")
	for _, tc := range []struct {
		state, body string
		code        int
	}{
		{"absent", "", exitOK},
		{"active", fmt.Sprintf("%d\n%d\n", os.Getpid(), time.Now().Unix()), exitMarkerActive},
		{"stale", fmt.Sprintf("%d\n%d\n", os.Getpid(), time.Now().Add(-48*time.Hour).Unix()), exitMarkerStale},
		{"unknown", "garbage", exitMarkerUnknown},
	} {
		if tc.state != "absent" {
			require.NoError(t, os.WriteFile(path, []byte(tc.body), 0o644))
		}
		r := runCmd(t, dir, "marker", path)
		assert.Equal(t, tc.code, r.code, "marker %s: %s", tc.state, r.stdout)
		assert.True(t, strings.HasPrefix(r.stdout, tc.state+": "), r.stdout)
		r = runCmd(t, dir, "marker", "--json", path)
		assert.Equal(t, tc.code, r.code, "marker --json %s", tc.state)
		var m map[string]string
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &m))
		assert.Equal(t, tc.state, m["state"])
	}
	assert.Equal(t, exitUsage, runCmd(t, dir, "marker").code)
}

// A --module that does not exist is named as given, for every command that
// takes one; status --json says so in JSON.
func TestMissingModuleNamesThePathGiven(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	dir := gittest.TempDir(t)
	for _, args := range [][]string{
		{"status"},
		{"check", "--expect", strings.Repeat("a", 40)},
		{"watch"},
		{"update", "--", "true"},
	} {
		cmd := commandProcess(append([]string{args[0], "--module", "missing/run_agent.py"}, args[1:]...)...)
		cmd.Dir = dir
		cmd.Env = append(cmd.Env, "HERMES_HOME="+dir)
		r := runProcess(t, cmd)
		want := exitUsage // the same in every command
		assert.Equal(t, want, r.code, "%v", args)
		assert.Contains(t, r.stderr, "--module missing/run_agent.py: no such file", "%v", args)

		// A directory is named as given too.
		cmd = commandProcess(append([]string{args[0], "--module", "."}, args[1:]...)...)
		cmd.Dir = dir
		cmd.Env = append(cmd.Env, "HERMES_HOME="+dir)
		r = runProcess(t, cmd)
		assert.Equal(t, want, r.code, "%v", args)
		assert.Contains(t, r.stderr, "--module .: a directory, not the module file", "%v", args)
	}
}

// status --json prints JSON whatever the outcome: a module that cannot be
// used and layout flags that describe no layout too.
func TestStatusJSONOnError(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	dir := gittest.TempDir(t)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--module", filepath.Join(dir, "missing.py")}, exitUsage, "no such file"},
		{[]string{"--module", filepath.Join(dir, "m.py"), "--marker", ""}, exitUsage, "--marker must not be empty"},
		{[]string{}, exitUsage, "--module is required"},
	} {
		r := runCmd(t, dir, append([]string{"status", "--json"}, tc.args...)...)
		assert.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		var s map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), "%v: stdout %q", tc.args, r.stdout)
		assert.Contains(t, s["error"], tc.msg, "%v", tc.args)
	}
	// A command line whose flags do not parse may not have asked for JSON:
	// the usage error alone, on standard error.
	r := runCmd(t, dir, "status", "--json", "--bogus")
	assert.Equal(t, exitUsage, r.code)
	assert.Empty(t, r.stdout)
}

// watch --json prints one JSON object a line: bound, current, stale with
// the revision the checkout moved to, stopped.
func TestWatchJSON(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	module, rev := checkout(t)
	cmd := commandProcess("watch", "--json", "--module", module, "--home", gittest.TempDir(t), "--interval", "20ms")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() map[string]any {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "watch ended early")
			var e map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &e), l)
			return e
		case <-time.After(30 * time.Second):
			t.Fatal("watch printed nothing")
			return nil
		}
	}
	e := next()
	assert.Equal(t, "bound", e["event"])
	assert.Equal(t, rev, e["revision"])
	assert.Equal(t, "current", next()["event"])
	moved := commitChange(t, module)
	e = next()
	assert.Equal(t, "stale", e["event"])
	assert.Equal(t, moved, e["current"])
	assert.Equal(t, "unverified", e["update_state"])
	git(t, filepath.Dir(module), "reset", "-q", "--hard", rev)
	e = next()
	assert.Equal(t, "current", e["event"])
	assert.Equal(t, rev, e["revision"])
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, "stopped", next()["event"])
	require.NoError(t, cmd.Wait())
}

// Every help text fits 80 columns and names its placeholders in capitals,
// the same in the synopsis as in the flags.
func TestHelpFitsAndPlaceholdersAgree(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	texts := map[string]string{"": runCmd(t, gittest.TempDir(t), "help").stdout}
	for _, cmd := range []string{"demo", "status", "check", "marker", "watch", "update", "version"} {
		texts[cmd] = runCmd(t, gittest.TempDir(t), cmd, "-h").stdout
	}
	for cmd, text := range texts {
		for _, line := range strings.Split(text, "\n") {
			assert.LessOrEqual(t, len([]rune(strings.ReplaceAll(line, "\t", "        "))), 80, "runtimeguard %s -h: %q", cmd, line)
		}
	}
	for cmd, text := range texts {
		if cmd == "" {
			continue
		}
		synopsis, flags, _ := strings.Cut(text, "\nFlags:")
		for _, f := range strings.Split(flags, "\n") {
			// "  -name PLACEHOLDER" in the flags is "--name PLACEHOLDER" in
			// the synopsis, where the synopsis names the flag.
			fields := strings.Fields(f)
			if len(fields) < 2 || !strings.HasPrefix(fields[0], "-") || strings.HasPrefix(f, "    ") {
				continue
			}
			name, ph := strings.TrimLeft(fields[0], "-"), fields[1]
			assert.Equal(t, strings.ToUpper(ph), ph, "%s: the placeholder of -%s", cmd, name)
			if i := strings.Index(synopsis, "--"+name+" "); i >= 0 {
				got := strings.Fields(synopsis[i+len(name)+3:])[0]
				assert.Equal(t, ph, strings.Trim(got, "[]"), "%s: --%s in the synopsis and the flags", cmd, name)
			}
		}
	}
}
