package fsread

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// A snapshot is trusted only once its files' timestamps are safely older
// than the read, and the rule is Git's: whole-second timestamps need more.
func TestStampSettled(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	fine := Stamp{present: true, mtime: base + 123456789, ctime: base + 123456789}
	assert.True(t, fine.Settled(time.Unix(0, fine.mtime+int64(fineTimestampMargin)+1)))
	assert.False(t, fine.Settled(time.Unix(0, fine.mtime+int64(fineTimestampMargin))))
	assert.False(t, fine.Settled(time.Unix(0, fine.mtime)))
	coarse := Stamp{present: true, mtime: base, ctime: base}
	assert.False(t, coarse.Settled(time.Unix(0, base+int64(2*time.Second))))
	assert.True(t, coarse.Settled(time.Unix(0, base+int64(coarseTimestampMargin)+1)))
	changed := fine
	changed.ctime = fine.mtime + int64(time.Hour)
	assert.False(t, changed.Settled(time.Unix(0, fine.mtime+int64(time.Minute))), "a recent ctime is not settled")
	assert.True(t, Stamp{}.Settled(time.Unix(0, 0)), "an absent file is settled")
}

// Nothing at a path is git's ENOTDIR when a part of the path is a file,
// else its ENOENT, on every platform and from every way of stamping.
func TestAbsentStampTellsNotDir(t *testing.T) {
	dir := gittest.TempDir(t)
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct {
		path   string
		notDir bool
	}{
		{filepath.Join(dir, "missing"), false},
		{filepath.Join(dir, "missing", "deeper"), false},
		{filepath.Join(file, "x"), true},
		{filepath.Join(file, "x", "y"), true},
	} {
		for name, stamp := range map[string]func(string) (Stamp, error){"stat": StatStamp, "lstat": LstatStamp} {
			st, err := stamp(tc.path)
			require.NoError(t, err, "%s %s", name, tc.path)
			assert.False(t, st.Present(), "%s %s", name, tc.path)
			assert.Equal(t, tc.notDir, st.NotDir(), "%s %s", name, tc.path)
		}
		_, st, err := ReadRegular(tc.path, 100, false)
		require.NoError(t, err, tc.path)
		assert.Equal(t, tc.notDir, st.NotDir(), "ReadRegular %s", tc.path)
	}
}
