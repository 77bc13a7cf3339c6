//go:build unix

package runtimeguard

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stale answer names the install directories of the checkout the
// configured path leads to now: a deploy that flips a link to one clone,
// then to another, is seen in the 409's install roots and recovery
// markers at each step, on every path, as a resolution of the path at the
// check would find them.
func TestStaleAnswerFollowsTheFlippedLink(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			tmp := tempDir(t)
			clones := []string{filepath.Join(tmp, "a"), filepath.Join(tmp, "b"), filepath.Join(tmp, "c")}
			for i, dir := range clones {
				agentRepo(t, dir)
				if i > 0 {
					commit(t, dir, "run_agent.py", "class AIAgent: clone = "+string(rune('a'+i))+"\n")
				}
			}
			current := filepath.Join(tmp, "current")
			flip := func(to string) {
				require.NoError(t, os.Symlink(to, current+".new"))
				require.NoError(t, os.Rename(current+".new", current))
			}
			flip(clones[0])
			g := bindFast(t, filepath.Join(current, "run_agent.py"), mode.env(t))
			for _, dir := range clones[1:] {
				flip(dir)
				writeFile(t, filepath.Join(dir, hermesIncomplete), "")
				for i := 0; i < 3; i++ {
					var se *StaleError
					require.True(t, errors.As(g.EnsureCurrent(), &se), "a check after the flip to %s", dir)
					assert.Equal(t, UpdateIncomplete, se.State)
					o := g.observe(g.config(), g.bound.Load())
					assert.Contains(t, o.InstallRoots, resolved(t, dir))
					assert.Equal(t, []string{filepath.Join(resolved(t, dir), hermesIncomplete)}, o.RecoveryMarkers)
				}
				require.NoError(t, os.Remove(filepath.Join(dir, hermesIncomplete)))
			}
		})
	}
}

// Guard.Observe reads the updater's files now, as a stale check does:
// right after a deploy flipped the link, before any check read the
// checkout again, it names the install directory the link leads to now,
// and that directory's recovery markers.
func TestObserveFollowsTheFlippedLink(t *testing.T) {
	tmp := tempDir(t)
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	agentRepo(t, a)
	agentRepo(t, b)
	current := filepath.Join(tmp, "current")
	flip := func(to string) {
		require.NoError(t, os.Symlink(to, current+".new"))
		require.NoError(t, os.Rename(current+".new", current))
	}
	flip(a)
	g := bindFast(t, filepath.Join(current, "run_agent.py"), statEnv())
	flip(b)
	writeFile(t, filepath.Join(b, hermesIncomplete), "")
	o := g.Observe()
	assert.Contains(t, o.InstallRoots, resolved(t, b))
	assert.Equal(t, []string{filepath.Join(resolved(t, b), hermesIncomplete)}, o.RecoveryMarkers)
	assert.Equal(t, UpdateIncomplete, o.State)
}

// After a deploy flipped the link, each check reads the checkout again
// (its configured path leads to another module file than the bound one),
// yet the stale answers of one window of staleReuse still share one read
// of the updater's files: the install directories are the same.
func TestStaleAnswersShareAReadAfterAFlip(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			tmp := tempDir(t)
			a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
			agentRepo(t, a)
			agentRepo(t, b)
			commit(t, b, "run_agent.py", "class AIAgent: clone = 2\n")
			current := filepath.Join(tmp, "current")
			flip := func(to string) {
				require.NoError(t, os.Symlink(to, current+".new"))
				require.NoError(t, os.Rename(current+".new", current))
			}
			flip(a)
			g := bindFast(t, filepath.Join(current, "run_agent.py"), mode.env(t))
			flip(b)
			bd := g.bound.Load()
			for tries := 0; ; tries++ {
				time.Sleep(staleReuse)
				start := time.Now()
				answers := map[*answeredRead]bool{}
				n := 0
				for ; n < 20 && time.Since(start) < staleReuse/2; n++ {
					var se *StaleError
					require.ErrorAs(t, g.EnsureCurrent(), &se)
					answers[bd.answered.Load()] = true
				}
				if time.Since(start) >= staleReuse && tries < 20 || n < 2 {
					require.Less(t, tries, 20, "two stale checks never took less than %v", staleReuse/2)
					continue // the machine paused: again
				}
				assert.Len(t, answers, 1, "reads of the updater's files by %d stale answers", n)
				break
			}
		})
	}
}
