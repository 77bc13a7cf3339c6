package main

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// forged is what a name holds after its newline: a line of its own if
// printed raw.
const forged = "FORGED revision: 0000"

// assertNoForgedLine fails if any line of out begins with forged: a path
// or a reason printed raw, its control characters included.
func assertNoForgedLine(t *testing.T, what, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		assert.False(t, strings.HasPrefix(line, forged), "%s: a name forged a line: %q", what, out)
	}
	assert.NotContains(t, out, "\x1b", "%s: an escape sequence reached the terminal", what)
}

// Every path and reason the plain-text forms print is quoted where it
// holds control characters: a module named "evil\nFORGED revision:
// 0000.py" in a directory named so too forges no line, in any command's
// output or error.
func TestPlainTextQuotesControlCharacters(t *testing.T) {
	t.Parallel() // processes, files and repositories of its own
	if runtime.GOOS == "windows" {
		t.Skip("Windows allows no newline in a file name")
	}
	evil := "evil\n" + forged + "\x1b[2K"
	dir := filepath.Join(gittest.TempDir(t), evil)
	rev := gittest.Init(t, dir, map[string]string{evil + ".py": "class AIAgent: pass\n", "other.py": "x\n"})
	module := filepath.Join(dir, evil+".py")
	home := filepath.Join(gittest.TempDir(t), evil)
	require.NoError(t, os.MkdirAll(home, 0o755))

	r := runCmd(t, home, "status", "--module", module)
	require.Equal(t, exitOK, r.code, r.stderr)
	assertNoForgedLine(t, "status", r.stdout)
	assert.Contains(t, r.stdout, `\n`+forged, "the name is shown, escaped")
	assert.Equal(t, 1, strings.Count(r.stdout, "\nrevision:"), r.stdout)

	// A reason that holds the path: the checkout cannot be read.
	ref := filepath.Join(dir, ".git", "refs", "heads", "main")
	require.NoError(t, os.WriteFile(ref, []byte("garbage\n"), 0o644))
	r = runCmd(t, home, "status", "--module", module)
	require.Equal(t, exitError, r.code, r.stderr)
	assertNoForgedLine(t, "status of an unreadable checkout", r.stdout+r.stderr)
	r = runCmd(t, home, "check", "--module", module, "--expect", rev)
	require.Equal(t, exitError, r.code, r.stderr)
	assertNoForgedLine(t, "check of an unreadable checkout", r.stdout+r.stderr)
	require.NoError(t, os.WriteFile(ref, []byte(rev+"\n"), 0o644))

	// The command's own errors, and the library's.
	for _, args := range [][]string{
		{"status", "--module", module + ".missing"},
		{"check", "--module", module, "--expect", strings.Repeat("a", 40), "--lock", "../" + evil},
		{"update", "--module", module, "--dir", filepath.Join(dir, evil), "--", "true"},
		{"watch", "--module", filepath.Join(dir, "other.py"), "--home", home, "--marker", evil + "/../../x"},
	} {
		r := runCmd(t, home, args...)
		assert.NotEqual(t, exitOK, r.code, "%q", args)
		assertNoForgedLine(t, args[0]+" error", r.stdout+r.stderr)
	}

	// watch: an untracked module's path (bound without Git), then the
	// bound checkout's.
	untracked := filepath.Join(dir, evil+".untracked.py")
	require.NoError(t, os.WriteFile(untracked, []byte("x\n"), 0o644))
	for _, m := range []string{untracked, module} {
		cmd := commandProcess("watch", "--module", m, "--home", home, "--interval", "20ms")
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(stdout)
		require.True(t, sc.Scan(), "watch printed nothing")
		assert.Contains(t, sc.Text(), "bound")
		assertNoForgedLine(t, "watch", sc.Text()+"\n")
		require.True(t, sc.Scan(), "watch printed no second line")
		assertNoForgedLine(t, "watch", sc.Text()+"\n")
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		for sc.Scan() {
			assertNoForgedLine(t, "watch", sc.Text()+"\n")
		}
		require.NoError(t, cmd.Wait())
	}

	// update's report names the receipt in the home.
	p := commandProcess("update", "--module", module, "--home", home, "--", "true")
	p.Env = append(p.Env, gittest.Env...)
	r = runProcess(t, p)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "success")
	assertNoForgedLine(t, "update", r.stdout+r.stderr)

	// demo prints where its throwaway home is.
	p = commandProcess("demo")
	p.Env = append(p.Env, "TMPDIR="+home)
	r = runProcess(t, p)
	require.Equal(t, exitOK, r.code, r.stderr)
	assertNoForgedLine(t, "demo", r.stdout+r.stderr)
}
