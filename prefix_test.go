package runtimeguard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The API's errors say "runtimeguard:" once, at the start, whatever part
// of the package failed.
func TestErrorsPrefixedOnce(t *testing.T) {
	dir := tempDir(t)
	mod, _ := agentRepo(t, dir)
	loop := filepath.Join(dir, "loop.py")
	require.NoError(t, os.Symlink(loop, loop))
	writeFile(t, filepath.Join(dir, "sub", "x"), "")
	g, err := New(Options{ModulePath: mod})
	require.NoError(t, err)
	cases := map[string]func() error{
		"empty module path":    func() error { var g Guard; return g.Capture("") },
		"missing module":       func() error { _, err := New(Options{ModulePath: filepath.Join(dir, "missing.py")}); return err },
		"a directory":          func() error { _, err := New(Options{ModulePath: filepath.Join(dir, "sub")}); return err },
		"a link loop":          func() error { _, err := New(Options{ModulePath: loop}); return err },
		"a link loop, Observe": func() error { _, err := Observe(Options{ModulePath: loop, Layout: Layout{HomeEnv: "X"}}); return err },
		"a second module":      func() error { return g.Capture(filepath.Join(dir, "sub", "x")) },
	}
	for name, f := range cases {
		err := f()
		require.Error(t, err, name)
		msg := err.Error()
		assert.True(t, strings.HasPrefix(msg, "runtimeguard: "), "%s: %q", name, msg)
		assert.Equal(t, 1, strings.Count(msg, "runtimeguard:"), "%s: %q", name, msg)
	}
}
