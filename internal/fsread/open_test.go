package fsread

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// readAllSmall reads r to its end through a buffer of n bytes.
func readAllSmall(r io.Reader, n int) ([]byte, error) {
	var out []byte
	buf := make([]byte, n)
	for {
		m, err := r.Read(buf)
		out = append(out, buf[:m]...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// OpenRegular finds what ReadRegular finds, and its Reader gives, through
// a buffer of any size, the bytes ReadRegular reads, then io.EOF: a
// regular file, an empty one, one at the limit; nothing, a path through a
// file, a directory, a file over the limit, each told apart as ReadRegular
// tells them.
func TestOpenRegularReadsWhatReadRegularReads(t *testing.T) {
	dir := gittest.TempDir(t)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		gittest.WriteFile(t, p, content)
		return p
	}
	big := strings.Repeat("0123456789abcdef", 40000) // 640,000 bytes: many reads of any buffer
	for _, tc := range []struct {
		name, path string
		limit      int64
	}{
		{"regular", write("f", "hello\n"), 100},
		{"empty", write("empty", ""), 100},
		{"exactly the limit", write("ten", strings.Repeat("x", 10)), 10},
		{"over the limit", write("eleven", strings.Repeat("x", 11)), 10},
		{"large", write("large", big), 1 << 20},
		{"absent", filepath.Join(dir, "missing"), 100},
		{"through a file", filepath.Join(dir, "f", "g"), 100},
		{"a directory", dir, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, nofollow := range []bool{false, true} {
				want, wantSt, wantErr := ReadRegular(tc.path, tc.limit, nofollow)
				for _, n := range []int{1, 7, 4096, 1 << 16} {
					r, st, err := OpenRegular(tc.path, tc.limit, nofollow)
					if wantErr != nil {
						require.Error(t, err, "OpenRegular(%q, %d, %v)", tc.path, tc.limit, nofollow)
						assert.Equal(t, wantErr.Error(), err.Error())
						assert.Nil(t, r)
						continue
					}
					require.NoError(t, err, "OpenRegular(%q, %d, %v)", tc.path, tc.limit, nofollow)
					assert.Equal(t, wantSt, st, "the stamp of OpenRegular(%q) is ReadRegular's", tc.path)
					if !st.Present() || st.IsDir() {
						assert.Nil(t, r, "OpenRegular(%q) opens nothing", tc.path)
						continue
					}
					require.NotNil(t, r)
					got, err := readAllSmall(r, n)
					require.NoError(t, err, "reading %q %d bytes at a time", tc.path, n)
					assert.Equal(t, string(want), string(got), "reading %q %d bytes at a time", tc.path, n)
					_, err = r.Read(make([]byte, 8))
					assert.ErrorIs(t, err, io.EOF, "a read after the end")
					require.NoError(t, r.Close())
					require.NoError(t, r.Close(), "a second Close")
				}
			}
		})
	}
}

// A file that grows or shrinks between the open and the end of its read
// fails the read with ErrGrew or ErrShrank, of the ErrChanged class, at
// the read that finds it; an in-place rewrite of the same size reads the
// new bytes, as any read would, and its Stamp (taken before) is older.
func TestOpenRegularSeesASizeChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string)
		want   error
	}{
		{"grew", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.WriteString("more")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, ErrGrew},
		{"shrank", func(t *testing.T, path string) { require.NoError(t, os.Truncate(path, 100)) }, ErrShrank},
		{"shrank to nothing", func(t *testing.T, path string) { require.NoError(t, os.Truncate(path, 0)) }, ErrShrank},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(gittest.TempDir(t), "f")
			gittest.WriteFile(t, path, strings.Repeat("x", 10000))
			r, st, err := OpenRegular(path, 1<<20, false)
			require.NoError(t, err)
			require.NotNil(t, r)
			defer r.Close()
			assert.EqualValues(t, 10000, st.Size())
			first := make([]byte, 50)
			_, err = io.ReadFull(r, first)
			require.NoError(t, err)
			tc.change(t, path)
			_, err = readAllSmall(r, 512)
			require.ErrorIs(t, err, tc.want)
			assert.ErrorIs(t, err, ErrChanged)
			_, again := r.Read(first)
			assert.Equal(t, err, again, "every read after the failure fails the same way")
		})
	}
}

// ReadAt reads the file at an offset, within the size fstat reported,
// without moving where Read reads from.
func TestReaderReadAt(t *testing.T) {
	path := filepath.Join(gittest.TempDir(t), "f")
	require.NoError(t, os.WriteFile(path, []byte("0123456789"), 0o644))
	r, _, err := OpenRegular(path, 100, false)
	require.NoError(t, err)
	defer r.Close()
	head := make([]byte, 3)
	_, err = io.ReadFull(r, head)
	require.NoError(t, err)
	at := make([]byte, 4)
	n, err := r.ReadAt(at, 6)
	require.NoError(t, err)
	assert.Equal(t, "6789", string(at[:n]))
	_, err = r.ReadAt(at, 7)
	assert.Error(t, err, "past the size fstat reported")
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "3456789", string(rest), "Read goes on where it was")
}
