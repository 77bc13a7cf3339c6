package gitread

import (
	"testing"
)

// ends splits data as checkEnds reads a file: its first and last
// headBytes (all of it when shorter).
func ends(data []byte) (head, tail []byte) {
	return data[:min(len(data), headBytes)], data[max(0, len(data)-headBytes):]
}

// FuzzEndsRefuseOnlyWhatTheParseRefuses: a packed-refs or an index that
// checkEnds refuses from its ends is one the whole parse refuses too, for
// every name asked: the check only spares the read of a file that fails.
func FuzzEndsRefuseOnlyWhatTheParseRefuses(f *testing.F) {
	const a = "1111111111111111111111111111111111111111"
	for _, seed := range []string{
		"# pack-refs with: peeled fully-peeled sorted \n" + a + " refs/heads/main\n",
		"zz refs/heads/main\n",
		"\x00\x00\x00\x00",
		a + " refs/heads/main",
		"\n" + a + " refs/heads/main\n",
		"DIRC\x00\x00\x00\x02\x00\x00\x00\x01",
		"DIRC\x00\x00\x00\x02\xff\xff\xff\xff",
		"DIRX\x00\x00\x00\x02\x00\x00\x00\x00",
	} {
		f.Add([]byte(seed), uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		if len(data) == 0 {
			return // checkEnds reads the whole of a small file
		}
		head, tail := ends(data)
		if packedEnds(head, tail, int64(len(data))) != nil {
			name := packedNames[int(which)%len(packedNames)]
			if oid, err := lookupPackedRef(data, name, 40); err == nil {
				t.Fatalf("%q: refused from its ends, but %s resolves to %q", data, name, oid)
			}
		}
		for _, hashLen := range []int{40, 64} {
			if indexHead(hashLen)(head, tail, int64(len(data))) != nil {
				if tracked, err := indexHasPath(data, "run_agent.py", hashLen); err == nil {
					t.Fatalf("%q: refused from its ends, but the index parses (tracked %v)", data, tracked)
				}
			}
		}
	})
}
