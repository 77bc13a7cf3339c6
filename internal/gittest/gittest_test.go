package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// childEnv marks the test binary run again by TestCallersGitVariablesAreIgnored.
const childEnv = "GITTEST_CHILD"

// startedChildEnv marks the test binary run again, with Env, by
// TestHarnessChildKeepsTheIsolation.
const startedChildEnv = "GITTEST_STARTED_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	if os.Getenv(startedChildEnv) != "" {
		os.Exit(startedChild())
	}
	os.Exit(m.Run())
}

// startedChild runs git as a program under test does, with its own
// environment as it is (not through Command), and prints the global
// configuration git reads.
func startedChild() int {
	out, err := exec.Command("git", "config", "--global", "--list").CombinedOutput()
	if err != nil && len(out) > 0 {
		os.Stderr.WriteString(err.Error() + ": " + string(out))
		return 1
	}
	os.Stdout.Write(out)
	return 0
}

// A test binary run again as a program under test (a command that runs
// git, such as an updater), with the harness's environment, keeps the
// harness's isolation: its own start removes git's variables of a caller,
// not those the harness set, so the git it runs reads no global config
// of the user's (no signing, no hooks).
func TestHarnessChildKeepsTheIsolation(t *testing.T) {
	if !Available() {
		t.Skip("git is not installed")
	}
	home := TempDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[core]\n\thooksPath = /nonexistent\n[commit]\n\tgpgsign = true\n"), 0o644))
	cmd := Self(nil)
	cmd.Env = append(append(cmd.Env, Env...), startedChildEnv+"=1", "HOME="+home, "XDG_CONFIG_HOME="+home)
	out, err := cmd.Output()
	var stderr []byte
	if ex, ok := err.(*exec.ExitError); ok {
		stderr = ex.Stderr
	}
	require.NoError(t, err, "%s", stderr)
	assert.Empty(t, string(out), "the child's git read the user's global config")
}

// child makes a repository and a commit with the harness, as a test does,
// and reports what git says of it: run in an environment that points git
// at another repository and configures it to sign.
func child() int {
	dir := os.Getenv(childEnv)
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "f"},
		{"commit", "-q", "-m", "c"},
	} {
		if args[0] == "add" {
			if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x\n"), 0o644); err != nil {
				os.Stderr.WriteString(err.Error())
				return 2
			}
		}
		if out, err := Command(dir, args...).CombinedOutput(); err != nil {
			os.Stderr.WriteString(strings.Join(args, " ") + ": " + err.Error() + ": " + string(out))
			return 1
		}
	}
	out, err := Command(dir, "rev-parse", "--show-toplevel", "--git-dir").Output()
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 1
	}
	os.Stdout.Write(out)
	os.Stdout.WriteString(Describe())
	return 0
}

// A caller whose environment has git's variables (a shell in a hook, a
// user who exported GIT_DIR or signs every commit through
// GIT_CONFIG_PARAMETERS) runs the tests as anyone else does: the harness's
// git works in the test's own repository, with the harness's settings.
func TestCallersGitVariablesAreIgnored(t *testing.T) {
	if !Available() {
		t.Skip("git is not installed")
	}
	dir := TempDir(t)
	other := TempDir(t)
	cmd := Self(nil,
		childEnv+"="+dir,
		"GIT_DIR="+filepath.Join(other, "elsewhere.git"),
		"GIT_WORK_TREE="+other,
		"GIT_INDEX_FILE="+filepath.Join(other, "index"),
		"GIT_CONFIG_PARAMETERS='commit.gpgsign'='true' 'core.hooksPath'='"+other+"'",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=user.signingkey", "GIT_CONFIG_VALUE_0=nonexistent",
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir),
	)
	out, err := cmd.Output()
	var stderr []byte
	if ex, ok := err.(*exec.ExitError); ok {
		stderr = ex.Stderr
	}
	require.NoError(t, err, "%s", stderr)
	lines := strings.Split(string(out), "\n")
	require.GreaterOrEqual(t, len(lines), 3, "%s", out)
	assert.Equal(t, Resolved(t, dir), Resolved(t, lines[0]))
	assert.Equal(t, ".git", lines[1])
	assert.Contains(t, lines[2], "not inheriting")
	assert.Contains(t, lines[2], "GIT_DIR")
	entries, err := os.ReadDir(other)
	require.NoError(t, err)
	assert.Empty(t, entries, "git wrote where the caller's variables pointed")
}
