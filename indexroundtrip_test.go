package runtimeguard

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// The index changed by git in quick succession, on every path: the module
// removed from it and added back (git rm --cached, git add), marked
// assume-unchanged or skip-worktree, the index rewritten in another
// version, split. After each, a check that says current is one git agrees
// with, run in the module's directory: it lists the module as tracked and
// names the bound revision as HEAD's.
func TestIndexRoundTripsAsGitSeesThem(t *testing.T) {
	steps := [][]string{
		{"rm", "-q", "--cached", "run_agent.py"},
		{"add", "run_agent.py"},
		{"rm", "-q", "--cached", "run_agent.py"},
		{"add", "run_agent.py"},
		{"update-index", "--assume-unchanged", "run_agent.py"},
		{"rm", "-q", "--cached", "run_agent.py"},
		{"add", "run_agent.py"},
		{"update-index", "--skip-worktree", "run_agent.py"},
		{"update-index", "--no-skip-worktree", "run_agent.py"},
		{"update-index", "--index-version", "4"},
		{"rm", "-q", "--cached", "run_agent.py"},
		{"add", "run_agent.py"},
		{"update-index", "--index-version", "2"},
		{"update-index", "--split-index"},
		{"update-index", "--no-split-index"},
		{"rm", "-q", "--cached", "run_agent.py"},
		{"add", "run_agent.py"},
	}
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			dir := tempDir(t)
			module, rev := agentRepo(t, dir)
			g := bindFast(t, module, mode.env(t))
			untracked, refused := 0, 0
			for round := 0; round < loopLength(3, 1); round++ {
				for _, step := range steps {
					gittest.Git(t, dir, step...)
					err := g.EnsureCurrent()
					tracked := gittest.Command(filepath.Dir(module), "ls-files", "--error-unmatch", "--", "run_agent.py").Run() == nil
					head := gittest.Git(t, filepath.Dir(module), "rev-parse", "HEAD")
					if !tracked {
						untracked++
					}
					if err != nil {
						refused++
					} else {
						assert.True(t, tracked && head == rev, "%s after git %v: current, where git says tracked %v, HEAD %s", gittest.Describe(), step, tracked, head)
					}
				}
			}
			assert.Positive(t, untracked, "git found the module untracked after some steps")
			assert.GreaterOrEqual(t, refused, untracked, "every untracked step refused")
		})
	}
}
