//go:build unix

package gitread

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// Of a Git directory's objects git asks one thing, access(2) for X_OK, so
// a stat-path proof (Holds) asks that and no more: what is there may
// change while git's answer does not. Each step below puts something else
// at objects and asks git itself whether the revision still stands; Holds
// must say so exactly when it does, without a stat of objects. Unchanged,
// which a watch relies on, sees that something else is there.
func TestIdentityDepsAskWhatGitAsks(t *testing.T) {
	gittest.Need(t)
	dir := filepath.Join(t.TempDir(), "repo")
	rev := gittest.Init(t, dir, map[string]string{"run_agent.py": "x\n"})
	objects := filepath.Join(dir, ".git", "objects")
	c, deps, err := Read(System, filepath.Join(dir, "run_agent.py"), true)
	require.NoError(t, err)
	require.Equal(t, rev, c.Revision)

	var statted []string
	counting := *System
	counting.Stat = func(p string) (fsread.Stamp, error) {
		statted = append(statted, p)
		return System.Stat(p)
	}
	counting.Lstat = func(p string) (fsread.Stamp, error) {
		statted = append(statted, p)
		return System.Lstat(p)
	}
	gitSays := func() bool {
		out, err := gittest.Command(dir, "rev-parse", "--verify", "HEAD").Output()
		return err == nil && strings.TrimSpace(string(out)) == rev
	}
	trash := t.TempDir()
	replace := func(step int, with func()) {
		// Moved aside, not removed: no inode number is freed for reuse.
		if _, err := os.Lstat(objects); err == nil {
			require.NoError(t, os.Rename(objects, filepath.Join(trash, strconv.Itoa(step))))
		}
		with()
	}
	steps := []struct {
		name string
		put  func()
	}{
		{"as read", func() {}},
		{"an empty directory", func() { require.NoError(t, os.Mkdir(objects, 0o755)) }},
		{"a file git cannot search", func() { require.NoError(t, os.WriteFile(objects, nil, 0o644)) }},
		{"an executable file", func() { require.NoError(t, os.WriteFile(objects, nil, 0o755)) }},
		{"nothing", func() {}},
		{"a directory again", func() { require.NoError(t, os.Mkdir(objects, 0o755)) }},
	}
	for i, s := range steps {
		if i > 0 {
			replace(i, s.put)
		}
		statted = statted[:0]
		holds := true
		for j := range deps {
			holds = holds && deps[j].Holds(&counting)
		}
		assert.Equal(t, gitSays(), holds, "objects is %s", s.name)
		assert.NotContains(t, statted, objects, "objects is %s: asked by access(2) alone", s.name)
		assert.Equal(t, i == 0, deps.Unchanged(System), "objects is %s: Unchanged", s.name)
	}
}
