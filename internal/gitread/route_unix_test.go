//go:build unix

package gitread

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Routed's route of each file the read depends on leads where the
// kernel's own resolution leads, and names every link on the way: a
// configured path through two links, a .git that is a link to the Git
// directory, and refs/heads a link to a directory elsewhere.
func TestRoutesLeadWhereTheKernelGoes(t *testing.T) {
	dir := tempDir(t)
	repo := filepath.Join(dir, "repo")
	agentRepo(t, repo)
	gitDir := filepath.Join(dir, "gitdir")
	require.NoError(t, os.Rename(filepath.Join(repo, ".git"), gitDir))
	require.NoError(t, os.Symlink(gitDir, filepath.Join(repo, ".git")))
	heads := filepath.Join(dir, "heads")
	require.NoError(t, os.Rename(filepath.Join(gitDir, "refs", "heads"), heads))
	require.NoError(t, os.Symlink("../../heads", filepath.Join(gitDir, "refs", "heads")))
	current, alias := filepath.Join(dir, "current"), filepath.Join(dir, "alias")
	require.NoError(t, os.Symlink("repo", alias))
	require.NoError(t, os.Symlink(alias, current))

	c, deps, routes, _, err := ReadWith(System, filepath.Join(current, "run_agent.py"), Ask{MustExist: true, Routes: true})
	require.NoError(t, err)
	require.NotEmpty(t, c.Revision)
	require.Len(t, routes, len(deps))
	// Each route, found from its directory's, is the walk of the whole
	// path, also where a part is missing or not a directory.
	fresh := reader{fs: System}
	for _, p := range append([]string{filepath.Join(gitDir, "refs", "heads", "none", "x"), filepath.Join(repo, "run_agent.py", "x")}, pathsOf(deps)...) {
		assert.Equal(t, fresh.walkRoute(p).Route, (&reader{fs: System}).route(p), "the route of %s", p)
	}
	links := map[string]bool{}
	for i, d := range deps {
		want, err := filepath.EvalSymlinks(d.Path)
		if err != nil {
			continue // not there: nothing to resolve
		}
		assert.Equal(t, want, routes[i].Resolved, "the route of %s", d.Path)
		for _, l := range routes[i].Links {
			links[l] = true
		}
	}
	for _, l := range []string{current, alias, filepath.Join(repo, ".git"), filepath.Join(gitDir, "refs", "heads")} {
		assert.True(t, links[resolved(t, filepath.Dir(l))+string(filepath.Separator)+filepath.Base(l)] || links[l], "the link %s is on a route", l)
	}
}
