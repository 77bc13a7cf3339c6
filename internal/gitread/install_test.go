package gitread

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// testStamp names the build a stamp's text is, where it is not "none".
var testStamp = &Stamp{Name: gittest.StampFile, Build: func(data []byte) (string, error) {
	if s := strings.TrimSpace(string(data)); s != "none" {
		return s, nil
	}
	return "", errors.New("it says none")
}}

// A read asked to identify a module without Git finds its file, and the
// build its stamp names, whose file is a dependency.
func TestReadIdentifiesAModuleWithoutGit(t *testing.T) {
	dir := tempDir(t)
	module := filepath.Join(dir, "agent", "run_agent.py")
	writeFile(t, module, "class AIAgent: pass\n")
	stamp := filepath.Join(dir, "agent", gittest.StampFile)
	writeFile(t, stamp, "build-1\n")

	c, deps, _, _, err := ReadWith(System, module, Ask{Stamp: testStamp})
	require.NoError(t, err)
	require.NotNil(t, c.Install)
	assert.Equal(t, "build-1", c.Revision)
	assert.Equal(t, resolved(t, stamp), c.Install.Stamp)
	st, err := fsread.LstatStamp(module)
	require.NoError(t, err)
	id, err := fsread.FileID(module, st)
	require.NoError(t, err)
	assert.Equal(t, id, c.Install.File)
	assert.Contains(t, pathsOf(deps), resolved(t, stamp), "the stamp is a dependency")

	writeFile(t, stamp, "none\n")
	c, _, _, _, err = ReadWith(System, module, Ask{Stamp: testStamp})
	require.NoError(t, err)
	assert.Empty(t, c.Revision)
	assert.Contains(t, c.Install.NoBuild, "it says none")
}

// A read of a module without Git alone reads no Git file, in a checkout
// or not: an outer repository's changes cannot reach its answer. A module
// path that leads to nothing is an install with no file.
func TestReadWithoutGitReadsNoGitFile(t *testing.T) {
	dir := tempDir(t)
	initRepo(t, dir, map[string]string{"tracked.txt": "x\n"})
	module := filepath.Join(dir, "installed", "run_agent.py")
	writeFile(t, module, "class AIAgent: pass\n")
	var looked []string
	fsys := *System
	fsys.Stat = func(p string) (fsread.Stamp, error) { looked = append(looked, p); return System.Stat(p) }
	fsys.Lstat = func(p string) (fsread.Stamp, error) { looked = append(looked, p); return System.Lstat(p) }
	fsys.ReadFile = func(p string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		looked = append(looked, p)
		return System.ReadFile(p, limit, nofollow)
	}
	c, deps, _, _, err := ReadWith(&fsys, module, Ask{Stamp: testStamp})
	require.NoError(t, err)
	require.NotNil(t, c.Install)
	assert.NotEmpty(t, c.Install.File)
	for _, p := range append(looked, pathsOf(deps)...) {
		assert.NotContains(t, p, ".git", "a read without Git looked at %s", p)
	}

	c, _, _, _, err = ReadWith(System, filepath.Join(dir, "installed", "gone.py"), Ask{Stamp: testStamp})
	require.NoError(t, err)
	assert.Empty(t, c.Install.File, "nothing at the module's path")
	_, _, _, _, err = ReadWith(System, filepath.Join(dir, "gone", "run_agent.py"), Ask{Stamp: testStamp})
	assert.Error(t, err, "a directory on the way that is not there")
}
