package fsread

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// symlink makes a symbolic link at link to target, or skips the test where
// the host cannot make one.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("this host cannot make a symbolic link: %v", err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Skipf("this host reported a symbolic link it did not make: %v", err)
	}
}

// The one bounded read: a regular file whole, stamped as lstat stamps it;
// nothing, a path through a file, a directory, a file over the limit, each
// told apart.
func TestReadRegular(t *testing.T) {
	for _, tc := range []struct {
		name    string
		make    func(t *testing.T, dir string) string
		limit   int64
		data    string
		present bool
		isDir   bool
		notDir  bool
		err     error
	}{
		{"regular", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "f")
			gittest.WriteFile(t, p, "hello\n")
			return p
		}, 100, "hello\n", true, false, false, nil},
		{"empty", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "f")
			gittest.WriteFile(t, p, "")
			return p
		}, 100, "", true, false, false, nil},
		{"exactly the limit", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "f")
			gittest.WriteFile(t, p, strings.Repeat("x", 10))
			return p
		}, 10, strings.Repeat("x", 10), true, false, false, nil},
		{"over the limit", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "f")
			gittest.WriteFile(t, p, strings.Repeat("x", 11))
			return p
		}, 10, "", false, false, false, &TooLargeError{Size: 11, Limit: 10}},
		{"absent", func(t *testing.T, dir string) string {
			return filepath.Join(dir, "missing")
		}, 100, "", false, false, false, nil},
		{"through a file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "f")
			gittest.WriteFile(t, p, "x")
			return filepath.Join(p, "g")
		}, 100, "", false, false, true, nil},
		{"a directory", func(t *testing.T, dir string) string {
			return dir
		}, 100, "", true, true, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.make(t, gittest.TempDir(t))
			for _, nofollow := range []bool{false, true} {
				data, st, err := ReadRegular(path, tc.limit, nofollow)
				if tc.err != nil {
					var tl *TooLargeError
					require.ErrorAs(t, err, &tl, "ReadRegular(%q, %d, %v)", path, tc.limit, nofollow)
					assert.Equal(t, tc.err, tl)
					continue
				}
				require.NoError(t, err, "ReadRegular(%q, %d, %v)", path, tc.limit, nofollow)
				assert.Equal(t, tc.data, string(data), "ReadRegular(%q, %d, %v)", path, tc.limit, nofollow)
				assert.Equal(t, tc.present, st.Present())
				assert.Equal(t, tc.isDir, st.IsDir())
				assert.Equal(t, tc.notDir, st.NotDir())
				if tc.present && !tc.isDir {
					assert.True(t, st.Regular())
					lst, err := LstatStamp(path)
					require.NoError(t, err)
					assert.True(t, lst.SameIdentity(st), "the read's stamp is of the file lstat stamps")
					assert.Equal(t, lst.Size(), st.Size())
				}
			}
		})
	}
}

// A final link is followed only when asked: without following, it is a
// file of the wrong type, whatever it leads to, and IsLinkLoop says a
// caller may look again.
func TestReadRegularNoFollow(t *testing.T) {
	dir := gittest.TempDir(t)
	target := filepath.Join(dir, "target")
	gittest.WriteFile(t, target, "ref: refs/heads/main\n")
	link := filepath.Join(dir, "link")
	symlink(t, target, link)

	data, _, err := ReadRegular(link, 100, false)
	require.NoError(t, err)
	assert.Equal(t, "ref: refs/heads/main\n", string(data))

	data, _, err = ReadRegular(link, 100, true)
	assert.Nil(t, data)
	var te *TypeError
	require.ErrorAs(t, err, &te, "ReadRegular(%q, 100, true)", link)
	assert.Equal(t, "symbolic link", te.Kind)
	assert.ErrorIs(t, err, ErrNotRegular)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, link, pe.Path)
	assert.False(t, errors.Is(err, ErrChanged))
}
