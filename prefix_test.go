package runtimeguard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	// A class of the package's (a sentinel, itself prefixed) named within
	// a message is named without its prefix.
	outside := filepath.Join(tempDir(t), "run_agent.py")
	writeFile(t, outside, "x\n")
	rev := strings.Repeat("a", 40)
	cases["ExpectRevision outside Git"] = func() error {
		_, err := New(Options{ModulePath: outside, ExpectRevision: rev})
		assert.ErrorIs(t, err, ErrNotCheckout)
		return err
	}
	cases["RequireCheckout outside Git"] = func() error {
		_, err := New(Options{ModulePath: outside, RequireCheckout: true})
		assert.ErrorIs(t, err, ErrNotCheckout)
		return err
	}
	cases["ExpectReceipt while an update runs"] = func() error {
		home := tempDir(t)
		writeMarker(t, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
		_, err := New(Options{ModulePath: mod, HomeDir: home, ExpectRevision: g.Identity().Revision, ExpectReceipt: "update_id:x"})
		assert.ErrorIs(t, err, ErrNotReady)
		return err
	}
	cases["a read that timed out"] = func() error {
		h := &hangingIndex{release: make(chan struct{})}
		hg, err := newGuard(Options{ModulePath: mod, HomeDir: dir, ReadTimeout: 50 * time.Millisecond, Check: "read"}, h.env())
		require.NoError(t, err)
		h.hang.Store(true)
		defer close(h.release)
		err = hg.EnsureCurrent()
		assert.ErrorIs(t, err, ErrReadTimeout)
		return err
	}
	for name, f := range cases {
		err := f()
		require.Error(t, err, name)
		msg := err.Error()
		assert.True(t, strings.HasPrefix(msg, "runtimeguard: "), "%s: %q", name, msg)
		assert.Equal(t, 1, strings.Count(msg, "runtimeguard:"), "%s: %q", name, msg)
	}
}
