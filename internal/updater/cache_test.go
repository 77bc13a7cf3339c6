package updater

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// A classification of an unchanged marker reads neither the marker nor the
// process's start time again: an lstat and a liveness probe. A rewritten
// marker, or another process, is read anew.
func TestCacheSparesReads(t *testing.T) {
	later := time.Now().Add(time.Hour) // every stamp settled
	path := filepath.Join(tempDir(t), markerName)
	gittest.WriteMarker(t, path, os.Getpid(), later.Add(-time.Minute))
	var opens, probes int
	e := probedEnv(func(pid int64) ProcInfo {
		probes++
		return ProbeProcess(pid)
	})
	open := e.Open
	e.Open = func(p string, limit int64) ([]byte, FileKind, string) {
		opens++
		return open(p, limit)
	}
	e.Now = func() time.Time { return later }
	e.Cache = new(Cache)
	for i := 0; i < 5; i++ {
		require.Equal(t, Live, e.ClassifyMarker(path, defaultMaxAge).Life)
	}
	assert.Equal(t, 1, opens, "marker reads")
	if runtime.GOOS == "linux" {
		assert.Equal(t, 1, probes, "process probes: a pidfd answers the rest")
	}

	child := gittest.LongChild(t)
	gittest.WriteMarker(t, path, child.Process.Pid, later.Add(-time.Minute))
	require.Equal(t, Live, e.ClassifyMarker(path, defaultMaxAge).Life)
	assert.Equal(t, 2, opens, "a rewritten marker is read again")
	require.NoError(t, child.Process.Kill())
	_, _ = child.Process.Wait()
	assert.Equal(t, Ended, e.ClassifyMarker(path, defaultMaxAge).Life, "the cached process exited")
}
