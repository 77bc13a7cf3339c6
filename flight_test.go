package runtimeguard

import (
	"testing"
	"time"
)

// BenchmarkBoundHandoff is what bounding a check's wait costs with no work
// at all: a call started on a goroutine of its own and waited for.
func BenchmarkBoundHandoff(b *testing.B) {
	var f flight[int]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if c, stuck := f.do(time.Second, func(c *call[int]) { c.val = 1 }); stuck != nil || c.val != 1 {
			b.Fatal(stuck)
		}
	}
}
