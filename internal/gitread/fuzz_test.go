package gitread

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// FuzzIndexHasPath: the index parser never panics or reads out of bounds,
// whatever the bytes.
func FuzzIndexHasPath(f *testing.F) {
	for _, data := range indexSeeds(f) {
		f.Add(data, "run_agent.py", false)
	}
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"), "a", true)
	f.Fuzz(func(t *testing.T, data []byte, path string, sha256 bool) {
		hashLen := 40
		if sha256 {
			hashLen = 64
		}
		_, _ = indexHasPath(data, path, hashLen)
	})
}

// packedNames are the refs FuzzLookupPackedRef asks for: full names, so
// that git reads them as refs and nothing else.
var packedNames = []string{"refs/heads/main", "refs/heads/a", "refs/heads/main/x", "refs/tags/v1"}

// FuzzLookupPackedRef: lookupPackedRef finds in any packed-refs content
// what git rev-parse finds there (a repository with no loose ref), or
// fails where git fails, or where git's answer depends on its C library
// (a ref listed twice); without git, it gives an object id of the right
// length, nothing, or an error.
func FuzzLookupPackedRef(f *testing.F) {
	const a, b = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	for _, seed := range []string{
		"# pack-refs with: peeled fully-peeled sorted \n" + a + " refs/heads/main\n^" + b + "\n",
		"zz refs/heads/main\n",
		"# pack-refs with: peeled fully-peeled \n" + a + " refs/heads/main\n" + b + " refs/heads/main\n",
		"# pack-refs with: peeled fully-peeled sorted \n" + a + " refs/heads/main\n" + b + " refs/heads/a\n",
		a + " refs/heads/main",
		a + " refs/heads/main\ngarbage\n",
		b + " refs/heads/a\n" + a + " refs/heads/main\n",
		"# hi\n" + a + " refs/heads/main\n",
	} {
		f.Add([]byte(seed), uint8(0))
	}
	git := exec.Command("git", "--version").Run() == nil
	dir := tempDir(f)
	repo := filepath.Join(dir, "repo.git")
	if git {
		gittest.Git(f, dir, "init", "-q", "--bare", repo)
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		name := packedNames[int(which)%len(packedNames)]
		oid, err := lookupPackedRef(data, name, 40)
		if err == nil && oid != "" && !isObjectID(oid, 40) {
			t.Fatalf("lookupPackedRef gave %q", oid)
		}
		if !git {
			return
		}
		if err := os.WriteFile(filepath.Join(repo, "packed-refs"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := gittest.Command(repo, "rev-parse", "--verify", "-q", name)
		out, gitErr := cmd.Output()
		want := strings.TrimSpace(string(out))
		switch {
		case gitErr == nil && errors.Is(err, errPackedTwice):
			// Failing closed where git's answer depends on its qsort.
		case gitErr == nil && errors.Is(err, ErrGitsDisagree):
			// Failing closed where another git version refuses the file.
		case gitErr == nil && (err != nil || oid != strings.ToLower(want)):
			t.Fatalf("%q in %q: lookupPackedRef gives %q, %v; git gives %s", name, data, oid, err, want)
		case gitErr != nil && err == nil && oid != "":
			t.Fatalf("%q in %q: lookupPackedRef gives %s; git finds nothing (%v)", name, data, oid, gitErr)
		}
	})
}

// FuzzGitConfig: parseGitConfig reads a config file as git config --list
// does, the same entries in the same order, or refuses it as git does,
// for the git the tests run (white space inside values is read as that
// version reads it); and parseRepoFormat decides as git's setup does
// whether a repository with that config can be read, and in which object
// format, or refuses it where git versions read a value it depends on
// differently.
func FuzzGitConfig(f *testing.F) {
	if _, err := exec.LookPath("git"); err != nil {
		f.Skip("git is not installed")
	}
	before245 := !gittest.AtLeast(f, 2, 45)
	f.Add([]byte("[core]\n\trepositoryformatversion = 0\n\tbare = false\n"))
	f.Add([]byte("[core] repositoryformatversion = 1\n[extensions]\n\tobjectFormat = sha256\n"))
	f.Add([]byte("\xef\xbb\xbf[remote.origin]\n\turl = \"a\\\\b\" ; c\n"))
	dir := tempDir(f)
	repo := filepath.Join(dir, "repo.git")
	gittest.Git(f, dir, "init", "-q", "--bare", repo)
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(dir, "config")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want, gitOK := gitConfigList(t, file)
		got, err := parseGitConfig(data, before245)
		if (err == nil) != gitOK {
			t.Fatalf("parseGitConfig(%q) error = %v, git config --list accepts it: %v", data, err, gitOK)
		}
		if err != nil {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("parseGitConfig(%q) = %+v,\ngit config --list gives %+v", data, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("parseGitConfig(%q) entry %d = %+v, git config --list gives %+v", data, i, got[i], want[i])
			}
		}
		if !formatMatters(got) {
			return
		}
		if err := os.WriteFile(filepath.Join(repo, "config"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd := gittest.Command(dir, "--git-dir="+repo, "--work-tree="+dir, "rev-parse", "--show-object-format")
		cmd.Stderr = &stderr
		out, gitErr := cmd.Output()
		var exit *exec.ExitError
		if gitErr != nil && !errors.As(gitErr, &exit) {
			t.Fatal(gitErr)
		}
		format, err := parseRepoFormat(data)
		switch {
		case gitErr == nil && err == nil:
			if got := strings.TrimSpace(string(out)); got != format.objectFormat {
				t.Fatalf("parseRepoFormat(%q) = %s, git rev-parse --show-object-format gives %s", data, format.objectFormat, got)
			}
		case gitErr == nil && errors.Is(err, ErrGitsDisagree):
			// Failing closed where another git reads the value otherwise.
		case gitErr == nil:
			t.Fatalf("parseRepoFormat(%q) error = %v, git reads the repository", data, err)
		case err == nil && aboutFormat(stderr.String()):
			t.Fatalf("parseRepoFormat(%q) = %+v, git refuses the repository: %s", data, format, stderr.String())
		}
	})
}

// formatMatters reports whether entries hold a key that git's setup reads
// from a repository's config, the ones parseRepoFormat reads, and none of
// the extensions that parseRepoFormat reads as later git versions do.
func formatMatters(entries []configEntry) bool {
	matters := false
	for _, e := range entries {
		switch e.key {
		case "extensions.refstorage", "extensions.compatobjectformat", "extensions.relativeworktrees", "extensions.submodulepathconfig":
			return false
		case "core.repositoryformatversion", "core.bare", "core.worktree":
			matters = true
		}
		matters = matters || strings.HasPrefix(e.key, "extensions.")
	}
	return matters
}

// aboutFormat reports whether git's error output is about the repository
// format rather than a value elsewhere in the config that git's later
// reading of it refuses.
func aboutFormat(stderr string) bool {
	for _, s := range []string{"repo version", "repository extension", "v1-only", "'core.repositoryformatversion'", "'extensions.", "'core.bare'", "'core.worktree'"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}
