package gitread

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
