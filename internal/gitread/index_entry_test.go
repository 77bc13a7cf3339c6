package gitread

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// indexEntryFlags returns the offset, in the SHA-1 index data of version
// 2 to 4, of each entry's flags word (an extended word follows it where
// the flags say).
func indexEntryFlags(t *testing.T, data []byte) []int {
	t.Helper()
	version := binary.BigEndian.Uint32(data[4:8])
	count := int(binary.BigEndian.Uint32(data[8:12]))
	var offs []int
	off := 12
	for range count {
		flags := off + 60
		offs = append(offs, flags)
		fixed := 62
		if binary.BigEndian.Uint16(data[flags:])&indexExtended != 0 {
			fixed += 2
		}
		name := off + fixed
		if version == 4 {
			for data[name]&0x80 != 0 { // the varint of the prefix stripped
				name++
			}
			name++
		}
		end := name
		for data[end] != 0 {
			end++
		}
		if version == 4 {
			off = end + 1
		} else {
			off += (fixed + end - name + 8) &^ 7
		}
	}
	return offs
}

// An index entry's flags say how long its name is, and git takes the name
// and the entry's size from them: a length that is not the name's makes
// git read another name, or the rest of the index askew. Where the module
// is the entry, or an entry before it, whose length was changed, the read
// must not find the module tracked where git ls-files (run in the module's
// directory) does not.
func TestIndexNameLengthAsGitReadsIt(t *testing.T) {
	for _, version := range []string{"2", "3", "4"} {
		for _, entry := range []int{0, 1} { // a.py, run_agent.py
			for _, delta := range []int{-3, -1, 1, 2, 9} {
				t.Run(fmt.Sprintf("v%s/entry%d/%+d", version, entry, delta), func(t *testing.T) {
					dir := tempDir(t)
					initRepo(t, dir, map[string]string{"a.py": "a\n", "run_agent.py": "x\n", "z.py": "z\n"})
					git(t, dir, "update-index", "--index-version", version)
					path := filepath.Join(dir, ".git", "index")
					data, err := os.ReadFile(path)
					require.NoError(t, err)
					flags := indexEntryFlags(t, data)[entry]
					v := binary.BigEndian.Uint16(data[flags:])
					binary.BigEndian.PutUint16(data[flags:], v&^0xfff|uint16(int(v&0xfff)+delta))
					sum := sha1.Sum(data[:len(data)-20])
					copy(data[len(data)-20:], sum[:])
					require.NoError(t, os.WriteFile(path, data, 0o644))

					out, gitErr := gittest.Command(dir, "ls-files", "--error-unmatch", "--", "run_agent.py").CombinedOutput()
					c, _, err := Read(System, filepath.Join(dir, "run_agent.py"), true)
					if gitErr != nil {
						assert.False(t, err == nil && c.Tracked, "%s: ls-files fails (%s), the read finds the module tracked", gittest.Describe(), out)
					} else if err == nil {
						assert.True(t, c.Tracked, "%s: ls-files finds it (%s)", gittest.Describe(), out)
					}
					t.Logf("%s: ls-files: %v %q; read: tracked %v, %v", gittest.Describe(), gitErr, out, c.Tracked, err)
				})
			}
		}
	}
}

// An entry's extended flags hold two bits git knows (intent to add, skip
// worktree); git refuses an index with an entry that sets any other, as a
// format it does not read. The read must not find the module tracked in
// such an index, whichever entry sets the bit.
func TestIndexExtendedFlagsAsGitReadsThem(t *testing.T) {
	for _, bits := range []uint16{0x8000, 0x1000, 0x0001, 0x2000, 0x4000} {
		for _, entry := range []int{0, 1} { // a.py, run_agent.py
			t.Run(fmt.Sprintf("%#04x/entry%d", bits, entry), func(t *testing.T) {
				dir := tempDir(t)
				initRepo(t, dir, map[string]string{"a.py": "a\n", "run_agent.py": "x\n", "z.py": "z\n"})
				// Extended flags on both: the index is of version 3.
				git(t, dir, "update-index", "--skip-worktree", "a.py", "run_agent.py")
				path := filepath.Join(dir, ".git", "index")
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				require.Equal(t, uint32(3), binary.BigEndian.Uint32(data[4:8]))
				ext := indexEntryFlags(t, data)[entry] + 2
				binary.BigEndian.PutUint16(data[ext:], bits)
				sum := sha1.Sum(data[:len(data)-20])
				copy(data[len(data)-20:], sum[:])
				require.NoError(t, os.WriteFile(path, data, 0o644))

				out, gitErr := gittest.Command(dir, "ls-files", "--error-unmatch", "--", "run_agent.py").CombinedOutput()
				c, _, err := Read(System, filepath.Join(dir, "run_agent.py"), true)
				if bits&^0x6000 != 0 {
					require.Error(t, gitErr, "%s refuses the index: %s", gittest.Describe(), out)
				}
				if gitErr != nil {
					assert.False(t, err == nil && c.Tracked, "%s: ls-files fails (%s), the read finds the module tracked", gittest.Describe(), out)
				} else {
					require.NoError(t, err)
					assert.True(t, c.Tracked, "%s: ls-files finds it (%s)", gittest.Describe(), out)
				}
			})
		}
	}
}
