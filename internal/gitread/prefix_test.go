package gitread

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reader's errors name no package: the public API adds its prefix
// once, where the error leaves it.
func TestErrorsUnprefixed(t *testing.T) {
	dir := tempDir(t)
	writeFile := func(p string) { require.NoError(t, os.WriteFile(p, []byte("x"), 0o644)) }
	writeFile(filepath.Join(dir, "m.py"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+filepath.Join(dir, "nowhere")+"\n"), 0o644))
	errs := map[string]error{}
	_, errs["Abs"] = Abs("")
	if runtime.GOOS != "windows" { // a link loop is an error as the kernel resolves links
		loop := filepath.Join(dir, "loop.py")
		require.NoError(t, os.Symlink(loop, loop))
		_, errs["ResolvePath"] = ResolvePath(loop)
		_, errs["Inspect loop"] = Inspect(loop)
	}
	_, errs["Read dangling .git"] = Inspect(filepath.Join(dir, "m.py"))
	_, errs["Read dangling .git"] = readRevision(filepath.Join(dir, "m.py"))
	errs["ErrNoModule"] = ErrNoModule
	for name, err := range errs {
		require.Error(t, err, name)
		assert.NotContains(t, err.Error(), "runtimeguard:", name)
	}
}
