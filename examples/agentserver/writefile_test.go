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

// TestImportsOnlyTheStandardLibraryAndThePublicAPI: the example is one a
// user can copy, so it imports the standard library and the module's public
// package only: none of the module's internal packages, which a user's
// module cannot import, and no other module, which a user's go.mod would
// have to gain.
func TestImportsOnlyTheStandardLibraryAndThePublicAPI(t *testing.T) {
	for _, goos := range []string{"linux", "windows", "darwin", "freebsd"} {
		ctx := build.Default
		ctx.GOOS = goos
		pkg, err := ctx.ImportDir(".", 0)
		require.NoError(t, err)
		for _, imp := range pkg.Imports { // its tests may use the module's test harness
			first, _, _ := strings.Cut(imp, "/")
			std := !strings.Contains(first, ".")
			assert.True(t, std || imp == "github.com/runtimeguard/runtimeguard",
				"the example imports %s (GOOS=%s): only the standard library and the public package are for copying", imp, goos)
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
