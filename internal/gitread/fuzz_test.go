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
	for _, name := range []string{"index-v2", "index-v3", "index-v4", "index-sha256"} {
		if data, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(data, "run_agent.py", false)
		}
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

// FuzzLookupPackedRef: any packed-refs content gives an object id of the
// right length, nothing, or an error.
func FuzzLookupPackedRef(f *testing.F) {
	f.Add([]byte("# pack-refs with: peeled fully-peeled sorted \n1111111111111111111111111111111111111111 refs/heads/main\n^2222222222222222222222222222222222222222\n"), "refs/heads/main")
	f.Add([]byte("zz refs/heads/main\n"), "refs/heads/main")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		oid, err := lookupPackedRef(data, name, 40)
		if err == nil && oid != "" && !isObjectID(oid, 40) {
			t.Fatalf("lookupPackedRef gave %q", oid)
		}
	})
}

// FuzzGitConfig: parseGitConfig reads a config file as git config --list
// does, the same entries in the same order, or refuses it as git does; and
// parseRepoFormat decides as git's setup does whether a repository with
// that config can be read, and in which object format.
func FuzzGitConfig(f *testing.F) {
	if _, err := exec.LookPath("git"); err != nil {
		f.Skip("git is not installed")
	}
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
		got, err := parseGitConfig(data)
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
		case "extensions.refstorage", "extensions.compatobjectformat", "extensions.relativeworktrees":
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
