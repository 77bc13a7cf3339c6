package updater

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	writeMarker(t, present, os.Getpid(), time.Now())
	for path, want := range map[string]FileKind{present: FileUnusable, filepath.Join(dir, "missing"): FileAbsent, dir: FileUnusable} {
		body, kind, _ := lstatOnly(path, MaxMarkerBytes)
		assert.Nil(t, body, "lstatOnly(%q)", path)
		assert.Equal(t, want, kind, "lstatOnly(%q)", path)
	}
}
