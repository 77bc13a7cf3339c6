//go:build unix

package gitread

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// A FIFO where git keeps a table or tables.list is refused at once (git
// itself would wait on it for a writer).
func TestReftableSpecialFiles(t *testing.T) {
	runDamageCases(t, []damageCase{
		{"a table that is a FIFO", "sha1", func(t *testing.T, rt string) {
			p := tablePaths(t, rt)[0]
			require.NoError(t, os.Remove(p))
			gittest.Mkfifo(t, p)
		}, true},
		{"tables.list a FIFO", "sha1", func(t *testing.T, rt string) {
			p := filepath.Join(rt, "tables.list")
			require.NoError(t, os.Remove(p))
			gittest.Mkfifo(t, p)
		}, true},
	})
}

// Git opens each table tables.list names as <reftable dir>/<name>, a name
// with slashes (or, on Unix, backslashes) too: the reader reads the same
// file, and gives the revision git gives.
func TestReftableTableNamesWithSlashes(t *testing.T) {
	for _, tc := range []struct{ what, dir, name string }{
		{"a subdirectory", "sub", "sub/"},
		{"two subdirectories", "sub/deeper", "sub/deeper/"},
		{"the directory itself", "", "./"},
		{"the directory through its parent", "", "../reftable/"},
		{"a backslash", "", `a\`},
	} {
		t.Run(tc.what, func(t *testing.T) {
			dir := tempDir(t)
			module := reftableRepo(t, dir, "sha1")
			rt := filepath.Join(dir, ".git", "reftable")
			var list strings.Builder
			for _, p := range tablePaths(t, rt) {
				name := tc.name + filepath.Base(p)
				require.NoError(t, os.MkdirAll(filepath.Join(rt, tc.dir), 0o755))
				require.NoError(t, os.Rename(p, filepath.Join(rt, filepath.FromSlash(name))))
				list.WriteString(name + "\n")
			}
			require.NoError(t, os.WriteFile(filepath.Join(rt, "tables.list"), []byte(list.String()), 0o644))
			_, ok := gitHead(t, dir)
			require.True(t, ok, "%s reads HEAD from %q", gittest.Describe(), list.String())
			assertAgreesWithGit(t, module, list.String())
		})
	}
}

// FuzzReftableTablesList: whatever tables.list says, naming the stack's
// tables where copies of them are (the reftable directory, sub/,
// sub/deeper/, and with a backslash in their name) or anything else, the
// reader gives HEAD's revision as git rev-parse HEAD does, fails where git
// fails, and never guards nothing where git has refs.
func FuzzReftableTablesList(f *testing.F) {
	var module, rt string
	var names []string
	if gittest.HasReftable() {
		dir := tempDir(f)
		module = reftableRepo(f, dir, "sha1")
		gittest.Git(f, dir, "branch", "side")
		gittest.Git(f, dir, "symbolic-ref", "HEAD", "refs/heads/side")
		rt = filepath.Join(dir, ".git", "reftable")
		for _, p := range tablePaths(f, rt) {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			for _, copyDir := range []string{"sub", "sub/deeper"} {
				gittest.WriteFile(f, filepath.Join(rt, copyDir, filepath.Base(p)), string(data))
			}
			gittest.WriteFile(f, filepath.Join(rt, `a\`+filepath.Base(p)), string(data))
			names = append(names, filepath.Base(p))
		}
	}
	list := func(prefix string) []byte {
		var b strings.Builder
		for _, n := range names {
			b.WriteString(prefix + n + "\n")
		}
		return []byte(b.String())
	}
	// Seeds: the list git wrote, and its tables in the other places (in
	// testdata, lists naming no table).
	for _, prefix := range []string{"", "sub/", "sub/deeper/", "./", "../reftable/sub/", `a\`, "sub//", "/"} {
		f.Add(list(prefix))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if module == "" {
			t.Skip("the git on PATH makes no reftable repository (before 2.45)")
		}
		if err := os.WriteFile(filepath.Join(rt, "tables.list"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		checkAgainstGit(t, module, true)
	})
}
