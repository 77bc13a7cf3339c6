package updater

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

func TestInstallRoots(t *testing.T) {
	root, err := filepath.Abs(filepath.Join(string(filepath.Separator), "srv"))
	require.NoError(t, err)
	src := filepath.Join(root, "agent")
	cases := []struct {
		python string
		want   []string
	}{
		{"", []string{src}},
		{filepath.Join(root, "venv", "bin", "python"), []string{src, root}},
		{filepath.Join(root, ".venv", "bin", "python3"), []string{src, root}},
		{filepath.Join(root, ".VENV", "Scripts", "python.exe"), []string{src, root}},
		{filepath.Join(root, "venv", "BIN", "python"), []string{src, root}},
		{filepath.Join(src, "venv", "bin", "python"), []string{src}}, // the venv's parent is the source dir: listed once
		{filepath.Join(root, "env", "bin", "python"), []string{src}},
		{filepath.Join(root, "venv", "lib", "python"), []string{src}},
		{"/usr/bin/python3", []string{src}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, InstallRoots(src, tc.python), "InstallRoots(%q, %q)", src, tc.python)
	}
}

// Without a safe open the marker is never opened: a missing marker is
// absent, and anything present, valid or not, proves nothing.
func TestLstatOnlyNeverOpens(t *testing.T) {
	dir := tempDir(t)
	present := filepath.Join(dir, "present-marker")
	gittest.WriteMarker(t, present, os.Getpid(), time.Now())
	for path, want := range map[string]FileKind{present: FileUnusable, filepath.Join(dir, "missing"): FileAbsent, dir: FileUnusable} {
		body, kind, _ := lstatOnly(path, MaxMarkerBytes)
		assert.Nil(t, body, "lstatOnly(%q)", path)
		assert.Equal(t, want, kind, "lstatOnly(%q)", path)
	}
}

// FuzzParseMarker: the body parser never panics, accepts only small UTF-8
// bodies of at least two lines, and reads the first two lines as pyInt and
// pyFloat read them.
func FuzzParseMarker(f *testing.F) {
	f.Add([]byte("1234\n1700000000.5\n"))
	f.Add([]byte("1\n0\n"))
	f.Add([]byte("not-a-pid\nnot-a-time\n"))
	f.Add([]byte("\xff\xfe"))
	f.Add([]byte("1267650600228229401496703205376\n1\n"))
	f.Add([]byte("5\nnan\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		pid, started, ok := ParseMarker(body)
		if !ok {
			return
		}
		if !utf8.Valid(body) || len(body) > MaxMarkerBytes {
			t.Fatalf("ParseMarker(%q) accepted a body that is not small UTF-8", body)
		}
		lines := strings.Split(string(body), "\n")
		if len(lines) < 2 {
			t.Fatalf("ParseMarker(%q) accepted one line", body)
		}
		n, _ := pyInt(lines[0])
		x, _ := pyFloat(lines[1])
		if pid != n || !sameFloat(started, x) {
			t.Fatalf("ParseMarker(%q) = %d, %v, want %d, %v", body, pid, started, n, x)
		}
	})
}

// A marker path through a file proves nothing on every platform: it is not
// the absence of a marker, which a path through a directory that exists
// would be.
func TestSafeOpenThroughAFileIsUnusable(t *testing.T) {
	if !fsread.SafeOpens {
		t.Skip("this platform never opens the updater's files (TestLstatOnlyNeverOpens)")
	}
	dir := tempDir(t)
	file := filepath.Join(dir, "home")
	require.NoError(t, os.WriteFile(file, []byte("a file, not a home\n"), 0o644))
	for _, path := range []string{filepath.Join(file, markerName), filepath.Join(file, "x", markerName)} {
		body, kind, why := SafeOpen(path, MaxMarkerBytes)
		assert.Nil(t, body)
		assert.Equal(t, FileUnusable, kind, "SafeOpen(%q) = %v %q, want unusable", path, kind, why)
		assert.NotEmpty(t, why)
	}
	body, kind, _ := SafeOpen(filepath.Join(dir, "missing", markerName), MaxMarkerBytes)
	assert.Nil(t, body)
	assert.Equal(t, FileAbsent, kind, "a path through nothing is absent")
}
