//go:build unix

package fsread

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// OpenRegular refuses a FIFO, a socket or a device by its type, never
// opening it into a read that blocks; a link to one too.
func TestOpenRegularRefusesSpecialFiles(t *testing.T) {
	dir := gittest.TempDir(t)
	fifo := filepath.Join(dir, "fifo")
	gittest.Mkfifo(t, fifo)
	sock := filepath.Join(dir, "sock")
	gittest.Mksocket(t, sock)
	link := filepath.Join(dir, "link")
	symlink(t, fifo, link)
	for _, tc := range []struct {
		path, kind string
		nofollow   bool
	}{
		{fifo, "named pipe", false},
		{fifo, "named pipe", true},
		{sock, "socket", false},
		{"/dev/zero", "character device", false},
		{link, "named pipe", false},
		{link, "symbolic link", true},
	} {
		done := make(chan error, 1)
		go func() {
			r, _, err := OpenRegular(tc.path, 100, tc.nofollow)
			if r != nil {
				r.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			var te *TypeError
			if assert.ErrorAs(t, err, &te, "OpenRegular(%q, 100, %v)", tc.path, tc.nofollow) {
				assert.Equal(t, tc.kind, te.Kind, "OpenRegular(%q, 100, %v)", tc.path, tc.nofollow)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("OpenRegular(%q, 100, %v) blocked", tc.path, tc.nofollow)
		}
	}
}
