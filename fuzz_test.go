package runtimeguard

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

var markerStates = map[MarkerState]bool{MarkerAbsent: true, MarkerActive: true, MarkerStale: true, MarkerUnknown: true}

// FuzzParseMarker: the body parser never panics, and what it accepts is a
// positive process ID this platform can ask about and a finite time.
func FuzzParseMarker(f *testing.F) {
	f.Add([]byte("1234\n1700000000.5\n"))
	f.Add([]byte("1\n0\n"))
	f.Add([]byte("not-a-pid\nnot-a-time\n"))
	f.Add([]byte("\xff\xfe"))
	f.Add([]byte("1267650600228229401496703205376\n1\n"))
	f.Add([]byte("5\nnan\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		pid, started, ok := parseMarker(body)
		if !ok {
			return
		}
		if pid <= 0 || int64(pid) > maxPID {
			t.Fatalf("parseMarker(%q) accepted pid %d", body, pid)
		}
		if started != started || started > 1e308 || started < -1e308 {
			t.Fatalf("parseMarker(%q) accepted time %v", body, started)
		}
		if !utf8.Valid(body) || len(body) > MaxMarkerBytes {
			t.Fatalf("parseMarker(%q) accepted a body that is not small UTF-8", body)
		}
	})
}

// FuzzReadUpdateMarker: any bytes in a real marker file classify as one of
// the four words, the file is left as it was, and no process is asked about
// unless the body parsed.
func FuzzReadUpdateMarker(f *testing.F) {
	f.Add([]byte("1234\n1700000000\n"), int64(0))
	f.Add([]byte("1\n1\n"), int64(3600))
	f.Add([]byte(""), int64(0))
	f.Add([]byte("99999\n-1e9\n"), int64(-3600))
	dir := tempDir(f)
	f.Fuzz(func(t *testing.T, body []byte, offset int64) {
		path := filepath.Join(dir, "marker")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1700000000, 0).Add(time.Duration(offset) * time.Second)
		e := testEnv(func(pid int) procInfo {
			if _, _, ok := parseMarker(body); !ok {
				t.Fatalf("liveness asked for %d of an unparsable body %q", pid, body)
			}
			return procInfo{state: liveness(pid % 3)}
		})
		e.now = func() time.Time { return now }
		got := e.readMarker(path, DefaultMaxMarkerAge)
		if !markerStates[got] || got == MarkerAbsent {
			t.Fatalf("readMarker(%q) = %q", body, got)
		}
		after, err := os.ReadFile(path)
		if err != nil || string(after) != string(body) {
			t.Fatalf("the marker changed: %q -> %q (%v)", body, after, err)
		}
	})
}

// FuzzPayload: the payload of any message and state is valid JSON with
// exactly the contract's keys.
func FuzzPayload(f *testing.F) {
	f.Add("restart required", "unverified")
	f.Add("", "")
	f.Add("<script>\"\\\u2028", "incomplete")
	f.Add("\xff\xfe", "\x00")
	f.Fuzz(func(t *testing.T, message, state string) {
		body, err := json.Marshal((&StaleError{Message: message, State: UpdateState(state)}).Payload())
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("invalid JSON %s: %v", body, err)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := []string{"error", "restart_scheduled", "retryable", "type"}
		if state != "" {
			want = []string{"agent_update_state", "error", "restart_scheduled", "retryable", "type"}
		}
		if len(keys) != len(want) {
			t.Fatalf("keys %v, want %v", keys, want)
		}
		for i := range keys {
			if keys[i] != want[i] {
				t.Fatalf("keys %v, want %v", keys, want)
			}
		}
		if m["type"] != PayloadType || m["retryable"] != true || m["restart_scheduled"] != false {
			t.Fatalf("payload %s breaks the contract", body)
		}
	})
}

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

// FuzzPrefersProblem: the Accept parser never panics.
func FuzzPrefersProblem(f *testing.F) {
	f.Add("application/problem+json;q=0.9, application/json;q=0.8")
	f.Add("*/*;q=")
	f.Fuzz(func(t *testing.T, accept string) {
		_ = prefersProblem([]string{accept})
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
