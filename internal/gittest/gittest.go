// Package gittest runs the git command for tests, isolated from the user's
// and the system's Git configuration, with a fixed identity and branch name.
package gittest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Env is the environment git runs with.
var Env = append(os.Environ(),
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL="+os.DevNull,
	"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.invalid",
	"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.invalid",
	"GIT_TERMINAL_PROMPT=0",
)

// Command returns git with args in dir, in Env, with main as the default
// branch and file transport allowed (for submodules).
func Command(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)...)
	cmd.Dir, cmd.Env = dir, Env
	return cmd
}

// Git runs git with args in dir and returns its trimmed output; it fails
// the test when git does.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	out, err := Command(dir, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}
