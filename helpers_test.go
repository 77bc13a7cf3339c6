package runtimeguard

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// git runs git in dir and returns its trimmed standard output.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return gittest.Git(t, dir, args...)
}

// writeFile writes content to dir/name, making parent directories.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// initRepo makes a repository in dir with one commit that tracks files
// (name to content) and returns the commit's id.
func initRepo(t testing.TB, dir string, files map[string]string, initArgs ...string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	git(t, dir, append([]string{"init", "-q"}, initArgs...)...)
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
		git(t, dir, "add", "--", name)
	}
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "initial")
	return git(t, dir, "rev-parse", "HEAD")
}

// commit changes file in the repository at dir, commits it and returns the
// new HEAD.
func commit(t testing.TB, dir, file, content string) string {
	t.Helper()
	writeFile(t, filepath.Join(dir, file), content)
	git(t, dir, "add", "--", file)
	git(t, dir, "commit", "-q", "-m", "change "+file)
	return git(t, dir, "rev-parse", "HEAD")
}

// agentRepo makes a checkout holding run_agent.py and returns the module
// path and its revision.
func agentRepo(t testing.TB, dir string) (module, rev string) {
	t.Helper()
	rev = initRepo(t, dir, map[string]string{"run_agent.py": "class AIAgent: pass\n"})
	return filepath.Join(dir, "run_agent.py"), rev
}

// writeMarker writes an update marker for pid, started at the given time.
func writeMarker(t testing.TB, path string, pid int, started time.Time) {
	t.Helper()
	writeFile(t, path, fmt.Sprintf("%d\n%.6f\n", pid, float64(started.UnixNano())/1e9))
}

// resolved returns p with symbolic links resolved (t.TempDir may be behind
// one, as on macOS).
func resolved(t testing.TB, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	require.NoError(t, err)
	return r
}

// testEnv is the system environment with a fixed process probe.
func testEnv(probe func(int) procInfo) *env {
	e := *systemEnv
	if probe != nil {
		e.probe = probe
	}
	return &e
}

// gitConfigList runs git config --file path --list -z and returns the
// entries git read, or ok false when git refused the file.
func gitConfigList(t testing.TB, path string) (entries []configEntry, ok bool) {
	t.Helper()
	out, err := gittest.Command(filepath.Dir(path), "config", "--file", path, "--list", "-z").Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil, false
	}
	require.NoError(t, err, "git config --file %s --list -z", path)
	for _, rec := range strings.Split(string(out), "\x00") {
		if rec == "" {
			continue
		}
		key, value, hasValue := strings.Cut(rec, "\n")
		entries = append(entries, configEntry{key: key, value: value, hasValue: hasValue})
	}
	return entries, true
}
