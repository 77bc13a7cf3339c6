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

// parseGitConfig reads a config file into its entries, in file order, as
// git 2.45 and later read it, or with before245 as earlier versions do
// (the two differ only in white space inside values). It refuses what Git
// refuses. Include directives are entries like any other: they are not
// followed.
func parseGitConfig(data []byte, before245 bool) ([]configEntry, error) {
	var entries []configEntry
	err := walkGitConfig(data, func(key, value, folded []byte, hasValue bool) error {
		if before245 {
			value = folded
		}
		entries = append(entries, configEntry{key: string(key), value: string(value), hasValue: hasValue})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// lookupConfig returns the last entry for key (canonical, as in
// [configEntry]), the one Git uses for a single-valued key.
func lookupConfig(entries []configEntry, key string) (configEntry, bool) {
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].key == key {
			return entries[i], true
		}
	}
	return configEntry{}, false
}

// configEntry is one key of a config file as `git config --list` prints
// it.
type configEntry struct {
	// key is the section in lower case, the subsection as written (a
	// legacy [section.subsection] header is lower-cased whole) and the
	// name in lower case, joined with ".".
	key string
	// value is the value with quotes, escapes and surrounding space
	// resolved.
	value string
	// hasValue is false for a key without "=", which Git reads as a
	// boolean true; an empty value ("key =") has one.
	hasValue bool
}

// readRevision is the revision Read finds for module, which need not
// exist (a module deleted, still tracked, has its checkout's revision).
func readRevision(module string) (string, error) {
	abs, err := Abs(module)
	if err != nil {
		return "", err
	}
	c, _, err := Read(System, abs, false)
	return c.Revision, err
}

func pathsOf(deps Deps) []string {
	var paths []string
	for _, d := range deps {
		paths = append(paths, d.Path)
	}
	return paths
}
