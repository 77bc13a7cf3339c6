package gitread

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// The shared harness under the names the tests use.
var (
	git       = gittest.Git
	tempDir   = gittest.TempDir
	writeFile = gittest.WriteFile
	initRepo  = gittest.Init
	commit    = gittest.Commit
	agentRepo = gittest.Agent
	resolved  = gittest.Resolved
)

// gitConfigList runs git config --file path --list -z and returns the
// entries git read, or ok false when git refused the file.
func gitConfigList(t testing.TB, path string) (entries []configEntry, ok bool) {
	t.Helper()
	gittest.Need(t)
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
