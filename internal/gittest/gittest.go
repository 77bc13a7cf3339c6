// Package gittest is the test harness every test package of the module
// shares: the git command isolated from the user's and the system's Git
// configuration (no global or system config, so no signing, hooks or
// templates of the user's), with a fixed identity and branch name, and the
// helpers that make repositories and files with it.
//
// A test that needs git is skipped where git is not installed (as under
// Wine), with the reason.
package gittest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// Available reports whether git is installed.
func Available() bool {
	_, err := exec.LookPath("git")
	return err == nil
}

// Need skips the test where git is not installed.
func Need(tb testing.TB) {
	tb.Helper()
	if !Available() {
		tb.Skip("git is not installed")
	}
}

// Git runs git with args in dir and returns its trimmed output; it fails
// the test when git does, and skips it where git is not installed.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	Need(tb)
	out, err := Command(dir, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// WriteFile writes content to path, making parent directories.
func WriteFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// Init makes a repository in dir with one commit that tracks files (name
// to content) and returns the commit's id. initArgs go to git init.
func Init(tb testing.TB, dir string, files map[string]string, initArgs ...string) string {
	tb.Helper()
	Need(tb)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	Git(tb, dir, append([]string{"init", "-q"}, initArgs...)...)
	for name, content := range files {
		WriteFile(tb, filepath.Join(dir, name), content)
		Git(tb, dir, "add", "--", name)
	}
	Git(tb, dir, "commit", "-q", "--allow-empty", "-m", "initial")
	return Git(tb, dir, "rev-parse", "HEAD")
}

// Commit changes file in the repository at dir, commits it and returns the
// new HEAD.
func Commit(tb testing.TB, dir, file, content string) string {
	tb.Helper()
	WriteFile(tb, filepath.Join(dir, file), content)
	Git(tb, dir, "add", "--", file)
	Git(tb, dir, "commit", "-q", "-m", "change "+file)
	return Git(tb, dir, "rev-parse", "HEAD")
}

// Agent makes a checkout in dir holding run_agent.py and returns the
// module path and its revision.
func Agent(tb testing.TB, dir string) (module, rev string) {
	tb.Helper()
	rev = Init(tb, dir, map[string]string{"run_agent.py": "class AIAgent: pass\n"})
	return filepath.Join(dir, "run_agent.py"), rev
}

// Resolved returns p with symbolic links resolved (a temporary directory
// may be behind one, as on macOS).
func Resolved(tb testing.TB, p string) string {
	tb.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// HasReftable reports whether the git on PATH makes reftable
// repositories (Git 2.45 and later: git init --ref-format=reftable).
func HasReftable() bool {
	out, err := exec.Command("git", "version").Output()
	if err != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimPrefix(strings.TrimSpace(string(out)), "git version "), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 2 || major == 2 && minor >= 45
}
