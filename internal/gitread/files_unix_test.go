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

// Holds errs only one way: wherever every dependency of a read holds, git
// still reads the read's revision, whatever was put at the Git
// directory's objects or refs (a directory, a file of either mode, a link
// to each of those or to nothing, nothing, the original made
// unsearchable), in each layout that puts them elsewhere (a .git
// directory, a .git file, a linked worktree's common directory), with
// loose or packed refs. A read after the change answers as git does.
// Without gittest.Long, each case runs with loose or packed refs, in turn.
func TestHoldsNeverOutlivesGitsVerdict(t *testing.T) {
	gittest.Need(t)
	link := func(to func(root string) string) func(p, aside, root string) error {
		return func(p, aside, root string) error { return os.Symlink(to(root), p) }
	}
	made := func(name string, mode os.FileMode, dir bool) func(root string) string {
		return func(root string) string {
			p := filepath.Join(root, name)
			if dir {
				require.NoError(t, os.Mkdir(p, mode))
			} else {
				require.NoError(t, os.WriteFile(p, nil, mode))
			}
			return p
		}
	}
	puts := []struct {
		name string
		put  func(p, aside, root string) error
	}{
		{"an empty directory", func(p, _, _ string) error { return os.Mkdir(p, 0o755) }},
		{"a file", func(p, _, _ string) error { return os.WriteFile(p, nil, 0o644) }},
		{"an executable file", func(p, _, _ string) error { return os.WriteFile(p, nil, 0o755) }},
		{"a link to the original", func(p, aside, _ string) error { return os.Symlink(aside, p) }},
		{"a link to an empty directory", link(made("empty", 0o755, true))},
		{"a link to an executable file", link(made("exe", 0o755, false))},
		{"a link to a file", link(made("file", 0o644, false))},
		{"a dangling link", link(func(root string) string { return filepath.Join(root, "none") })},
		{"a link to /dev/null", link(func(string) string { return "/dev/null" })},
		{"nothing", func(string, string, string) error { return nil }},
		{"the original, unsearchable", func(p, aside, _ string) error {
			if err := os.Rename(aside, p); err != nil {
				return err
			}
			t.Cleanup(func() { os.Chmod(p, 0o755) })
			return os.Chmod(p, 0)
		}},
	}
	n := 0
	for _, layout := range []string{".git directory", ".git file", "linked worktree"} {
		for _, target := range []string{"objects", "refs"} {
			for _, pt := range puts {
				n++
				for _, packed := range []bool{false, true} {
					if !gittest.Long() && packed != (n%2 == 0) {
						continue
					}
					name := layout + "/" + target + "/loose/" + pt.name
					if packed {
						name = layout + "/" + target + "/packed/" + pt.name
					}
					t.Run(name, func(t *testing.T) {
						root := t.TempDir()
						main := filepath.Join(root, "main")
						rev := gittest.Init(t, main, map[string]string{"run_agent.py": "x\n"})
						work, common := main, filepath.Join(main, ".git")
						switch layout {
						case ".git file":
							sep := filepath.Join(root, "sep.git")
							require.NoError(t, os.Rename(common, sep))
							require.NoError(t, os.WriteFile(common, []byte("gitdir: "+sep+"\n"), 0o644))
							common = sep
						case "linked worktree":
							work = filepath.Join(root, "wt")
							gittest.Git(t, main, "worktree", "add", "--detach", work)
						}
						if packed {
							gittest.Git(t, main, "pack-refs", "--all")
						}
						gitSays := func() (string, bool) {
							out, err := gittest.Command(work, "rev-parse", "--verify", "HEAD").Output()
							return strings.TrimSpace(string(out)), err == nil
						}
						module := filepath.Join(work, "run_agent.py")
						c, deps, err := Read(System, module, true)
						require.NoError(t, err)
						require.Equal(t, rev, c.Revision)

						p, aside := filepath.Join(common, target), filepath.Join(root, "aside")
						require.NoError(t, os.Rename(p, aside))
						require.NoError(t, pt.put(p, aside, root))

						holds := true
						for i := range deps {
							holds = holds && deps[i].Holds(System)
						}
						now, ok := gitSays()
						if holds {
							assert.True(t, ok && now == rev, "every dependency holds, yet git says %q (ok %v)", now, ok)
						}
						again, _, err := Read(System, module, true)
						if ok {
							assert.Equal(t, now, again.Revision, "a read after the change (error %v)", err)
						} else {
							assert.Empty(t, again.Revision, "a read after the change, where git finds no revision")
						}
					})
				}
			}
		}
	}
}
