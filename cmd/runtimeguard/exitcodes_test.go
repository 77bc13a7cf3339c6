package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// moduleCommands are the commands that take --module, each with the
// arguments it needs besides (update's command goes last, after "--").
func moduleCommands(rev string) map[string][]string {
	return map[string][]string{
		"status": nil,
		"check":  {"--expect", rev},
		"watch":  {"--interval", "20ms"},
		"update": nil,
	}
}

// moduleCommandLine is cmd's command line with flags, its own arguments
// and, for update, a command to run that records that it ran in ran.
func moduleCommandLine(cmd string, own []string, ran string, flags ...string) []string {
	args := append(append([]string{cmd}, own...), flags...)
	if cmd == "update" {
		args = append(args, "--", "sh", "-c", "echo ran > "+ran)
	}
	return args
}

// withoutEnv is env without the variable name.
func withoutEnv(env []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// One table of exit codes holds for every command: a command line that
// does not fit (an unknown flag, a value the flag does not take, a flag
// value that describes no layout, a --module that names no regular file,
// an argument too many) exits 2 with one line that says why and one that
// points to --help; a module in no tracked checkout, where the command
// needs one, exits 1. The same mistake exits the same way in each.
func TestExitCodesAreOneTable(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	if runtime.GOOS == "windows" {
		t.Skip("the cases use sh, /dev/null and a pipe as /dev/stdin")
	}
	module, rev := checkout(t)
	outside := filepath.Join(gittest.TempDir(t), "run_agent.py")
	require.NoError(t, os.WriteFile(outside, []byte("x\n"), 0o644))
	missing := filepath.Join(gittest.TempDir(t), "missing.py")
	dir := gittest.TempDir(t)
	dangling := filepath.Join(gittest.TempDir(t), "dangling.py")
	require.NoError(t, os.Symlink(missing, dangling))
	homeFile := filepath.Join(gittest.TempDir(t), "home")
	require.NoError(t, os.WriteFile(homeFile, nil, 0o644))

	type tc struct {
		name  string
		flags []string
		code  map[string]int // by command; "" for every other
		want  string         // in standard error
		env   func([]string) []string
		stdin bool // standard input is a pipe
	}
	cases := []tc{
		{name: "unknown flag", flags: []string{"--module", module, "--bogus"}, code: map[string]int{"": exitUsage}, want: "unknown flag --bogus"},
		{name: "unknown flag, one dash", flags: []string{"--module", module, "-bogus"}, code: map[string]int{"": exitUsage}, want: "unknown flag --bogus"},
		// (update's --module would take the "--" before its command.)
		{name: "flag without its value", flags: []string{"--module"}, code: map[string]int{"": exitUsage, "update": -1}, want: "flag --module needs a value"},
		{name: "bad boolean", flags: []string{"--module", module, "--json=maybe"}, code: map[string]int{"": exitUsage, "check": exitUsage, "update": exitUsage}, want: "--json"},
		{name: "no module", code: map[string]int{"": exitUsage}, want: "--module"},
		{name: "missing module", flags: []string{"--module", missing}, code: map[string]int{"": exitUsage}, want: "--module " + missing + ": no such file"},
		{name: "module is a directory", flags: []string{"--module", dir}, code: map[string]int{"": exitUsage}, want: "--module " + dir + ": a directory"},
		{name: "module is a dangling link", flags: []string{"--module", dangling}, code: map[string]int{"": exitUsage}, want: "--module " + dangling + ": a symbolic link to " + missing + ", which leads to no file"},
		{name: "module is a device", flags: []string{"--module", "/dev/null"}, code: map[string]int{"": exitUsage}, want: "--module /dev/null: a character device, not the module file"},
		{name: "module is a pipe", flags: []string{"--module", "/dev/stdin"}, stdin: true, code: map[string]int{"": exitUsage}, want: "--module /dev/stdin: a named pipe, not the module file"},
		{name: "marker outside the home", flags: []string{"--module", module, "--marker", "../x"}, code: map[string]int{"": exitUsage}, want: "--marker"},
		// An empty --home ("$UNSET") is no home, not the default one.
		{name: "empty home", flags: []string{"--module", module, "--home", ""}, code: map[string]int{"": exitUsage}, want: "--home is empty"},
		{name: "empty marker", flags: []string{"--module", module, "--marker", ""}, code: map[string]int{"": exitUsage}, want: "--marker"},
		{name: "receipt outside the home", flags: []string{"--module", module, "--receipt", "/abs/last.json"}, code: map[string]int{"": exitUsage}, want: "--receipt"},
		// A layout without a receipt is one a guard reads; update writes one.
		{name: "empty receipt", flags: []string{"--module", module, "--receipt", ""}, code: map[string]int{"update": exitUsage, "status": exitOK, "check": exitOK, "watch": -1}, want: "--receipt"},
		// No home: a guard reads no updater's files; update writes them.
		{
			name: "no home", flags: []string{"--module", module, "--default-home", ""},
			env:  func(env []string) []string { return withoutEnv(env, "HERMES_HOME") },
			code: map[string]int{"update": exitUsage, "status": exitOK, "check": exitOK, "watch": -1}, want: "no home directory is known",
		},
		// A home that is a file: a guard reads no marker or receipt there
		// and says so (unknown, unusable); update can write none.
		{name: "home is a file", flags: []string{"--module", module, "--home", homeFile}, code: map[string]int{"update": exitUsage, "status": exitOK, "check": exitOK, "watch": -1}, want: "not a directory"},
		{name: "module in no checkout", flags: []string{"--module", outside}, code: map[string]int{"": exitError, "status": exitOK, "watch": -1}, want: "outside"},
	}
	for cmd, own := range moduleCommands(rev) {
		for _, c := range cases {
			code, ok := c.code[cmd]
			if !ok {
				code = c.code[""]
			}
			if code < 0 {
				continue // runs until stopped: the watch tests' part
			}
			t.Run(cmd+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				ran := filepath.Join(gittest.TempDir(t), "ran")
				p := commandProcess(moduleCommandLine(cmd, own, ran, c.flags...)...)
				p.Env = append(p.Env, "HERMES_HOME="+gittest.TempDir(t))
				if c.env != nil {
					p.Env = c.env(p.Env)
				}
				if c.stdin {
					r, w, err := os.Pipe()
					require.NoError(t, err)
					defer r.Close()
					defer w.Close()
					p.Stdin = r
				}
				r := runBounded(t, p)
				assert.Equal(t, code, r.code, "stderr: %s", r.stderr)
				assert.NoFileExists(t, ran, "update ran its command")
				if code == exitOK {
					return
				}
				if c.want == "outside" {
					c.want = outside
				}
				assert.Contains(t, r.stderr, c.want)
				assert.NotContains(t, r.stderr, "Usage:", "a flag error prints a pointer, not the whole usage")
				if code == exitUsage {
					lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
					require.Len(t, lines, 2, "%q", r.stderr)
					assert.True(t, strings.HasPrefix(lines[0], "runtimeguard "+cmd+": "), "%q", lines[0])
					assert.Equal(t, "Run 'runtimeguard "+cmd+" --help' for usage.", lines[1])
				}
			})
		}
	}

	// The commands without --module follow the same table.
	for _, args := range [][]string{
		{"demo", "--bogus"}, {"demo", "extra"},
		{"marker", "--bogus", "x"}, {"marker"}, {"marker", "--max-age", "soon", "x"}, {"marker", ""},
		{"version", "--bogus"}, {"version", "extra"},
		{"status", "--module", module, "extra"}, {"check", "--module", module, "--expect", rev, "--repeat", "x"},
		{"watch", "--module", module, "--interval", "0"}, {"watch", "--module", module, "--interval", "1ns"}, {"update", "--module", module, "--wait", "-1s", "--", "true"},
		// A full hex id of the other object format: a value --expect does
		// not take for this checkout, known once the checkout is read.
		{"check", "--module", module, "--expect", strings.Repeat("a", 64)},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCmd(t, gittest.TempDir(t), args...)
			assert.Equal(t, exitUsage, r.code, "stderr: %s", r.stderr)
			assert.Empty(t, r.stdout)
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			require.Len(t, lines, 2, "%q", r.stderr)
			assert.True(t, strings.HasPrefix(lines[0], "runtimeguard "+args[0]+": "), "%q", lines[0])
			assert.NotRegexp(t, `(^|\s)-[a-z]`, strings.TrimPrefix(lines[0], "runtimeguard "+args[0]+": "), "a flag named with one dash")
			assert.Equal(t, "Run 'runtimeguard "+args[0]+" --help' for usage.", lines[1])
		})
	}
}

// runBounded runs p as runProcess does, and kills it if it has not ended
// in a minute: a command that should end must fail the test, not hang the
// suite. (A bound on a hang, not on speed: the command ends at once.)
func runBounded(t *testing.T, p *exec.Cmd) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	p.Stdout, p.Stderr = &stdout, &stderr
	require.NoError(t, p.Start())
	stop := time.AfterFunc(time.Minute, func() { _ = p.Process.Kill() })
	err := p.Wait()
	if !stop.Stop() {
		t.Error("the command did not end: killed")
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, stdout.String(), stderr.String()}
}
