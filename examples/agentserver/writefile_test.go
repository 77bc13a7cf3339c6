package main

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// TestImportsNoInternalPackage: the example is one a user can copy, so it
// imports none of the module's internal packages, which a user's module
// cannot import.
func TestImportsNoInternalPackage(t *testing.T) {
	for _, tags := range [][]string{{"linux"}, {"windows"}, {"darwin"}} {
		ctx := build.Default
		ctx.GOOS = tags[0]
		pkg, err := ctx.ImportDir(".", 0)
		require.NoError(t, err)
		for _, imp := range pkg.Imports { // its tests may use the module's test harness
			assert.False(t, strings.HasPrefix(imp, "github.com/runtimeguard/runtimeguard/internal/"),
				"the example imports %s (GOOS=%s)", imp, tags[0])
		}
	}
}

// TestWriteFileDurably replaces the file whole, with the permissions
// asked, and leaves no temporary file behind.
func TestWriteFileDurably(t *testing.T) {
	dir := gittest.TempDir(t) // a cleanup that Wine can carry out
	path := filepath.Join(dir, "sessions.json")
	require.NoError(t, writeFileDurably(path, []byte("old\n"), 0o600))
	require.NoError(t, writeFileDurably(path, []byte("new\n"), 0o600))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new\n", string(got))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left")

	// A directory that cannot be written to leaves the file as it was.
	assert.Error(t, writeFileDurably(filepath.Join(dir, "missing", "x.json"), []byte("x"), 0o600))
}
