// Package gittest is the test harness every test package of the module
// shares: the git command isolated from the user's and the system's Git
// configuration (no global or system config, so no signing, hooks or
// templates of the user's), with a fixed identity and branch name, no
// automatic maintenance, and the
// helpers that make repositories and files with it.
//
// A test that needs git is skipped where git is not installed (as under
// Wine), with the reason.
//
// The git the tests run is the first on PATH, or the one RUNTIMEGUARD_GIT
// names: an executable called git, whose directory the harness then puts
// first on the PATH of the test process, so that every git a test runs,
// itself or through a command it starts, is that one. The first test
// that needs git logs which one it is ([Describe]); a test whose
// expectation depends on git's version asks it ([AtLeast]).
package gittest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// EnvGit names the variable that chooses the git the tests run.
const EnvGit = "RUNTIMEGUARD_GIT"

// choice is the error of a RUNTIMEGUARD_GIT that cannot be used, or nil;
// it is made before Env so that Env holds the PATH it sets.
var choice = chooseGit()

// scrubbed lists the variables of git's (GIT_*) the test process was
// started with and no longer has: made before Env, so neither Env nor any
// process a test starts inherits them.
var scrubbed = scrubGitEnv()

// settings are the variables of git's the harness sets, each as
// NAME=value: no system or global config (so no signing, hooks or
// templates of the user's), a fixed identity, no prompt, no automatic
// maintenance (git 2.48 and later run it detached after a commit, a
// process that would still be writing the repository,
// objects/maintenance.lock, while a test copies or changes it).
var settings = []string{
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=" + os.DevNull,
	"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.invalid",
	"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.invalid",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_CONFIG_COUNT=2",
	"GIT_CONFIG_KEY_0=maintenance.auto", "GIT_CONFIG_VALUE_0=false",
	"GIT_CONFIG_KEY_1=gc.auto", "GIT_CONFIG_VALUE_1=0",
}

// scrubGitEnv removes from the test process's environment every variable
// git reads whose name starts with GIT_ (GIT_DIR, GIT_WORK_TREE,
// GIT_INDEX_FILE, GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT and its keys,
// GIT_CEILING_DIRECTORIES, GIT_DISCOVERY_ACROSS_FILESYSTEM, ...): a
// caller's shell inside a repository's hook, or a user's exported
// settings, would otherwise point the tests' git at another repository or
// configure it, and change what the tests, and the guard, see. A test that
// needs one sets it itself (t.Setenv, or a command's Env). Where every
// variable the harness sets is there with the harness's value (a test
// binary run again with Env, as the program under test, such as a command
// that runs git), those stay, so that the git it runs keeps the harness's
// isolation; every other is removed all the same.
func scrubGitEnv() []string {
	environ := os.Environ()
	harness := true
	for _, kv := range settings {
		harness = harness && slices.Contains(environ, kv)
	}
	var names []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") && !(harness && slices.Contains(settings, kv)) {
			names = append(names, name)
			_ = os.Unsetenv(name)
		}
	}
	return names
}

// chooseGit puts the directory of the git RUNTIMEGUARD_GIT names first on
// PATH.
func chooseGit() error {
	exe := os.Getenv(EnvGit)
	if exe == "" {
		return nil
	}
	if filepath.Base(exe) != "git" && filepath.Base(exe) != "git.exe" {
		return fmt.Errorf("%s=%s: not an executable named git", EnvGit, exe)
	}
	abs, err := filepath.Abs(exe)
	if err != nil {
		return fmt.Errorf("%s=%s: %w", EnvGit, exe, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("%s: %w", EnvGit, err)
	}
	return os.Setenv("PATH", filepath.Dir(abs)+string(filepath.ListSeparator)+os.Getenv("PATH"))
}

// Env is the environment git runs with. Its capacity is its length, so
// that a test's append(Env, …) (or to a Command's Env) makes a copy and
// never writes into what tests running in parallel share.
var Env = slices.Clip(append(os.Environ(), settings...))

// Command returns git with args in dir, in Env, with main as the default
// branch and file transport allowed (for submodules).
func Command(dir string, args ...string) *exec.Cmd {
	return CommandWith("git", dir, args...)
}

// CommandWith is Command with the git at path.
func CommandWith(path, dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(path, append([]string{"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)...)
	cmd.Dir, cmd.Env = dir, Env
	return cmd
}

// EnvCurrentGit names a current git, for the tests that make what only
// newer versions write where the git the tests run is older.
const EnvCurrentGit = "RUNTIMEGUARD_CURRENT_GIT"

// Current returns the path of a git of version major.minor or newer: the
// git the tests run when it is that new, else the one RUNTIMEGUARD_CURRENT_GIT
// names. Without one it skips the test, saying why (CI always has one:
// .ci/current-git.sh installs it).
func Current(tb testing.TB, major, minor int) string {
	tb.Helper()
	Need(tb)
	if AtLeast(tb, major, minor) {
		return version.path
	}
	exe := os.Getenv(EnvCurrentGit)
	if exe == "" {
		tb.Skipf("needs git %d.%d or newer: the tests run %s and %s is not set", major, minor, Describe(), EnvCurrentGit)
	}
	text, maj, min, err := versionOf(exe)
	if err != nil {
		tb.Fatalf("%s: %v", EnvCurrentGit, err)
	}
	if maj < major || maj == major && min < minor {
		tb.Skipf("needs git %d.%d or newer: %s=%s is %s", major, minor, EnvCurrentGit, exe, text)
	}
	tb.Logf("made with %s (%s)", text, exe)
	return exe
}

// GitWith is Git with the git at path.
func GitWith(tb testing.TB, path, dir string, args ...string) string {
	tb.Helper()
	out, err := CommandWith(path, dir, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s in %s: %v\n%s", path, strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Available reports whether git is installed.
func Available() bool {
	_, err := exec.LookPath("git")
	return err == nil
}

// version is what git --version said, read once.
var version struct {
	once         sync.Once
	path, text   string
	major, minor int
	err          error
	logged       sync.Once
}

var versionPattern = regexp.MustCompile(`^git version (\d+)\.(\d+)`)

func readVersion() {
	version.once.Do(func() {
		if version.path, version.err = exec.LookPath("git"); version.err != nil {
			return
		}
		version.text, version.major, version.minor, version.err = versionOf(version.path)
	})
}

// versionOf asks the git at path its version.
func versionOf(path string) (text string, major, minor int, err error) {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return "", 0, 0, fmt.Errorf("%s --version: %w", path, err)
	}
	text = strings.TrimSpace(string(out))
	m := versionPattern.FindStringSubmatch(text)
	if m == nil {
		return text, 0, 0, fmt.Errorf("%s --version says %q", path, text)
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return text, major, minor, nil
}

// Describe says which git the tests run: its version and path.
func Describe() string {
	readVersion()
	if version.err != nil {
		return "no usable git: " + version.err.Error()
	}
	d := version.text + " (" + version.path + ")"
	if len(scrubbed) > 0 {
		d += ", not inheriting " + strings.Join(scrubbed, ", ")
	}
	return d
}

// AtLeast reports whether the git the tests run is major.minor or newer;
// it fails the test when its version cannot be read, and skips it where
// git is not installed.
func AtLeast(tb testing.TB, major, minor int) bool {
	tb.Helper()
	Need(tb)
	if version.err != nil {
		tb.Fatal(version.err)
	}
	return version.major > major || version.major == major && version.minor >= minor
}

// Need skips the test where git is not installed, and fails it where
// RUNTIMEGUARD_GIT names no git. The first test of a process that needs
// git logs which git it is.
func Need(tb testing.TB) {
	tb.Helper()
	// Read while the test runs, so that go test's cache counts it: a run
	// with another git is not answered from a run with this one.
	_ = os.Getenv(EnvGit)
	if choice != nil {
		tb.Fatal(choice)
	}
	if !Available() {
		tb.Skip("git is not installed")
	}
	readVersion()
	version.logged.Do(func() { tb.Logf("the tests run %s", Describe()) })
}

// Git runs git with args in dir and returns its trimmed output; it fails
// the test when git does, and skips it where git is not installed.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	Need(tb)
	out, err := Command(dir, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s in %s (%s): %v\n%s", strings.Join(args, " "), dir, Describe(), err, out)
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
	readVersion()
	return version.err == nil && (version.major > 2 || version.major == 2 && version.minor >= 45)
}

// HostileHome makes a home directory whose ~/.gitconfig would break any
// git that reads it: core.hooksPath names hooks that fail
// (reference-transaction, pre-commit, post-checkout) and commit.gpgsign is
// set. A test points HOME at it to show that a git it starts reads no
// user's config.
func HostileHome(tb testing.TB) string {
	tb.Helper()
	home := TempDir(tb)
	hooks := filepath.Join(home, "hooks")
	for _, h := range []string{"reference-transaction", "pre-commit", "post-checkout"} {
		WriteFile(tb, filepath.Join(hooks, h), "#!/bin/sh\necho a hook of the user ran: "+h+" >&2\nexit 1\n")
		if err := os.Chmod(filepath.Join(hooks, h), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	WriteFile(tb, filepath.Join(home, ".gitconfig"), "[core]\n\thooksPath = "+filepath.ToSlash(hooks)+"\n[commit]\n\tgpgsign = true\n")
	return home
}
