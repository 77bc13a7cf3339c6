//go:build windows

package updater

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

func TestWindowsMarkerKinds(t *testing.T) {
	dir := tempDir(t)
	regular := filepath.Join(dir, markerName)
	gittest.WriteMarker(t, regular, os.Getpid(), time.Now())
	assert.Equal(t, Live, readMarker(regular), "a regular file")
	assert.Equal(t, NoUpdate, readMarker(filepath.Join(dir, "missing")))
	assert.Equal(t, NoUpdate, readMarker(filepath.Join(dir, "no-dir", "missing")))
	assert.Equal(t, Unsure, readMarker(dir), "a directory")
	assert.Equal(t, Unsure, readMarker(`\\.\NUL`), "a device")
	assert.Equal(t, Unsure, readMarker(filepath.Join(dir, "NUL")), "a reserved device name")

	big := filepath.Join(dir, "big")
	writeFile(t, big, fmt.Sprintf("%d\n%d\n", os.Getpid(), time.Now().Unix())+strings.Repeat("x", MaxMarkerBytes))
	assert.Equal(t, Unsure, readMarker(big), "over the size cap")
}

func TestWindowsSymlinkMarkerIsNotFollowed(t *testing.T) {
	dir := tempDir(t)
	target := filepath.Join(dir, "real-marker")
	gittest.WriteMarker(t, target, os.Getpid(), time.Now())
	link := filepath.Join(dir, markerName)
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("this host cannot make a symbolic link: %v", err)
	}
	if _, err := os.Lstat(link); err != nil {
		// Wine 8 reports success from CreateSymbolicLink but makes nothing.
		t.Skipf("this host reported a symbolic link it did not make: %v", err)
	}
	assert.Equal(t, Unsure, readMarker(link))
}

// A live process that started after the marker's time did not write it.
func TestWindowsReusedPIDMarkerIsStale(t *testing.T) {
	written := time.Now().Add(-30 * time.Second)
	child := gittest.Self(nil, gittest.WaitChildEnv+"=1")
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	defer func() { _ = stdin.Close(); _ = child.Wait() }()

	path := filepath.Join(tempDir(t), markerName)
	gittest.WriteMarker(t, path, child.Process.Pid, written)
	assert.Equal(t, Ended, readMarker(path))
	gittest.WriteMarker(t, path, child.Process.Pid, time.Now())
	assert.Equal(t, Live, readMarker(path))
}
