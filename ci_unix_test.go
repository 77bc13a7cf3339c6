//go:build unix

package runtimeguard

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// TestCICheckoutIgnoresUsersGitConfig: the checkout the Windows CI makes
// (.ci/test-checkout.sh) is made whatever the user's Git configuration
// says: a global, XDG or environment config that signs commits with a
// program that fails, runs a failing hook, or copies one from a template
// changes nothing.
func TestCICheckoutIgnoresUsersGitConfig(t *testing.T) {
	gittest.Need(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	home := gittest.TempDir(t)
	hooks := filepath.Join(home, "hooks")
	gittest.WriteFile(t, filepath.Join(hooks, "pre-commit"), "#!/bin/sh\necho hook ran >&2\nexit 1\n")
	gittest.WriteFile(t, filepath.Join(home, "templates", "hooks", "pre-commit"), "#!/bin/sh\necho template hook ran >&2\nexit 1\n")
	require.NoError(t, os.Chmod(filepath.Join(hooks, "pre-commit"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(home, "templates", "hooks", "pre-commit"), 0o755))
	hostile := "[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = false\n[user]\n\tsigningKey = nobody\n" +
		"[core]\n\thooksPath = " + hooks + "\n[init]\n\ttemplateDir = " + filepath.Join(home, "templates") + "\n"
	gittest.WriteFile(t, filepath.Join(home, ".gitconfig"), hostile)
	gittest.WriteFile(t, filepath.Join(home, "xdg", "git", "config"), hostile)

	dir := filepath.Join(gittest.TempDir(t), "agent")
	cmd := exec.Command("bash", filepath.Join(".ci", "test-checkout.sh"), dir)
	cmd.Env = append(os.Environ(),
		"HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "xdg"),
		"GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=commit.gpgSign", "GIT_CONFIG_VALUE_0=true",
		"GIT_CONFIG_PARAMETERS='commit.gpgsign'='true'")
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "test-checkout.sh: %s", stderr)
	rev := strings.TrimSpace(string(out))
	assert.Equal(t, gittest.Git(t, dir, "rev-parse", "--verify", "HEAD"), rev)
	assert.NotContains(t, gittest.Git(t, dir, "cat-file", "commit", "HEAD"), "gpgsig", "the commit is not signed")
	gittest.Git(t, dir, "--literal-pathspecs", "ls-files", "--error-unmatch", "run_agent.py")
	got, err := inspectRevision(filepath.Join(dir, "run_agent.py"))
	require.NoError(t, err)
	assert.Equal(t, rev, got)
}
