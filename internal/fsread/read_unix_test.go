//go:build unix

package fsread

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// readWithin is ReadRegular in a goroutine that must return: a read that
// blocked would otherwise hang the run.
func readWithin(t *testing.T, path string, nofollow bool) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, _, err := ReadRegular(path, 100, nofollow)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("ReadRegular(%q, 100, %v) blocked", path, nofollow)
		return nil
	}
}

// A FIFO, a socket or a device is refused by its type, never opened into a
// read that blocks, with or without following links; a link to one too.
func TestReadRegularRefusesSpecialFiles(t *testing.T) {
	dir := gittest.TempDir(t)
	fifo := filepath.Join(dir, "fifo")
	gittest.Mkfifo(t, fifo)
	sock := filepath.Join(dir, "sock")
	gittest.Mksocket(t, sock)
	for _, tc := range []struct {
		path, kind string
		nofollow   bool
	}{
		{fifo, "named pipe", false},
		{fifo, "named pipe", true},
		{sock, "socket", true},
		{"/dev/null", "character device", true},
		{"/dev/zero", "character device", false},
	} {
		err := readWithin(t, tc.path, tc.nofollow)
		var te *TypeError
		if assert.ErrorAs(t, err, &te, "ReadRegular(%q, 100, %v)", tc.path, tc.nofollow) {
			assert.Equal(t, tc.kind, te.Kind, "ReadRegular(%q, 100, %v)", tc.path, tc.nofollow)
		}
	}
	link := filepath.Join(dir, "link")
	symlink(t, fifo, link)
	err := readWithin(t, link, false)
	var te *TypeError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "named pipe", te.Kind)
}
