package gitread

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// indexShape changes the SHA-1 index data of a checkout holding a.py,
// run_agent.py and z.py, with the index version given: what git reads
// otherwise than an index git writes.
type indexShape struct {
	name    string
	version string
	change  func(t *testing.T, data []byte) []byte
	// gitReads: git ls-files finds run_agent.py tracked, and so must the
	// read. Otherwise git reads past the end of the file or refuses it,
	// and the read must refuse it.
	gitReads bool
}

// extensionsStart is the offset of the first extension of a SHA-1 index
// of version 2 or 3: where its last entry ends.
func extensionsStart(t *testing.T, data []byte) int {
	flags := indexEntryFlags(t, data)
	last := flags[len(flags)-1]
	fixed := 62
	if binary.BigEndian.Uint16(data[last:])&indexExtended != 0 {
		fixed += 2
	}
	n := bytes.IndexByte(data[last+fixed-60:], 0)
	return last - 60 + (fixed+n+8)&^7
}

// withExtension is data with an extension of the signature and size given,
// and no content, before its checksum.
func withExtension(data []byte, sig string, size uint32) []byte {
	ext := binary.BigEndian.AppendUint32([]byte(sig), size)
	return append(append(append([]byte(nil), data[:len(data)-20]...), ext...), data[len(data)-20:]...)
}

func indexShapes() []indexShape {
	var shapes []indexShape
	for n := 1; n < 8; n++ {
		// git reads extensions while 8 bytes are left before the
		// checksum, the last 20 bytes of the file.
		shapes = append(shapes, indexShape{name: fmt.Sprintf("%d bytes after the checksum", n), version: "2", gitReads: true,
			change: func(_ *testing.T, data []byte) []byte { return append(data, make([]byte, n)...) }})
	}
	shapes = append(shapes,
		indexShape{name: "an optional extension past the end", version: "2", gitReads: true,
			change: func(_ *testing.T, data []byte) []byte { return withExtension(data, "ZZZZ", 1<<31) }},
		indexShape{name: "an optional extension into the checksum", version: "3", gitReads: true,
			change: func(_ *testing.T, data []byte) []byte { return withExtension(data, "ZZZZ", 12) }},
		indexShape{name: "a sparse index's mark past the end", version: "2", gitReads: true,
			change: func(_ *testing.T, data []byte) []byte { return withExtension(data, "sdir", 1000) }},
		indexShape{name: "a required extension past the end", version: "2",
			change: func(_ *testing.T, data []byte) []byte { return withExtension(data, "zzzz", 1<<31) }},
		// git parses a cache tree up to the size given, past the end of
		// the file too: what it reads there is not the file's.
		indexShape{name: "a cache tree past the end", version: "2",
			change: func(_ *testing.T, data []byte) []byte { return withExtension(data, "TREE", 1<<20) }},
		indexShape{name: "version 2 with extended flags", version: "2", gitReads: true,
			change: func(t *testing.T, data []byte) []byte {
				// Made as version 3 by skip-worktree (see the test),
				// and called version 2.
				binary.BigEndian.PutUint32(data[4:8], 2)
				return data
			}},
	)
	for entry, what := range []string{"a.py", "run_agent.py"} {
		for _, version := range []string{"2", "3"} {
			// A name one byte longer than its NUL, the same padded
			// size: git takes the length from the flags, and the name
			// as a C string up to the NUL.
			shapes = append(shapes, indexShape{name: "v" + version + " " + what + " one byte longer than its NUL", version: version, gitReads: true,
				change: func(t *testing.T, data []byte) []byte {
					flags := indexEntryFlags(t, data)[entry]
					binary.BigEndian.PutUint16(data[flags:], binary.BigEndian.Uint16(data[flags:])+1)
					return data
				}})
		}
	}
	shapes = append(shapes,
		// The first entry has no previous name: git ignores its prefix.
		indexShape{name: "v4 first entry strips a prefix", version: "4", gitReads: true,
			change: func(t *testing.T, data []byte) []byte {
				data[indexEntryFlags(t, data)[0]+2] = 0x05
				return data
			}},
		// Git reads entries up to the file's end: the checksum is the
		// file's last bytes, whatever else they are.
		indexShape{name: "the last entry's name in the checksum", version: "2", gitReads: true,
			change: func(t *testing.T, data []byte) []byte {
				flags := indexEntryFlags(t, data)
				binary.BigEndian.PutUint32(data[8:12], 2)
				return append(data[:flags[1]+2+len("run_agent.py")+1:flags[1]+2+len("run_agent.py")+1], make([]byte, 7)...)
			}},
		indexShape{name: "the last entry's padding past the end", version: "2", gitReads: true,
			change: func(t *testing.T, data []byte) []byte {
				flags := indexEntryFlags(t, data)
				return data[:flags[2]+2+len("z.py")+1]
			}},
		indexShape{name: "an extension's header in the checksum", version: "2",
			change: func(t *testing.T, data []byte) []byte {
				// Eight bytes left before the checksum: git reads them
				// as a required extension's header.
				return append(data[:extensionsStart(t, data)], []byte("zzzz\x00\x00\x00\x00zzzzzzzzzzzzzzzzzzzz")...)
			}},
	)
	return shapes
}

// The index as git reads it: where git ls-files finds the module tracked,
// the read finds it tracked; where git refuses the index or reads past the
// file's end, the read refuses it.
func TestIndexShapesAsGitReadsThem(t *testing.T) {
	for _, shape := range indexShapes() {
		t.Run(shape.name, func(t *testing.T) {
			dir := tempDir(t)
			initRepo(t, dir, map[string]string{"a.py": "a\n", "run_agent.py": "x\n", "z.py": "z\n"})
			if shape.name == "version 2 with extended flags" {
				git(t, dir, "update-index", "--skip-worktree", "a.py", "run_agent.py")
			} else {
				git(t, dir, "update-index", "--index-version", shape.version)
			}
			path := filepath.Join(dir, ".git", "index")
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, shape.change(t, data), 0o644))

			out, gitErr := gittest.Command(dir, "ls-files", "--error-unmatch", "--", "run_agent.py").CombinedOutput()
			c, _, err := Read(System, filepath.Join(dir, "run_agent.py"), true)
			if shape.gitReads {
				require.NoError(t, gitErr, "%s reads the index: %s", gittest.Describe(), out)
				require.NoError(t, err, "%s reads the index", gittest.Describe())
				assert.True(t, c.Tracked, "%s finds the module tracked", gittest.Describe())
			} else {
				assert.Error(t, err, "%s: ls-files %v %s; the read finds tracked %v", gittest.Describe(), gitErr, out, c.Tracked)
			}
		})
	}
}

// With index.threads, git writes an index's entries in blocks whose
// offsets it records (IEOT), and where the extensions start (EOIE); it
// then reads the entries of each block from its offset, the block's first
// with no previous name (version 4), and the extensions from there. Where
// those tables agree with the entries, the read finds what git finds; where
// they do not, git with threads names other entries than git without, and
// the read must not find the module tracked.
func TestIndexThreadedTablesAsGitReadsThem(t *testing.T) {
	for _, version := range []string{"2", "4"} {
		for _, moved := range []bool{false, true} {
			t.Run(fmt.Sprintf("v%s/block moved %v", version, moved), func(t *testing.T) {
				dir := tempDir(t)
				initRepo(t, dir, map[string]string{"a.py": "a\n", "run_agent.py": "x\n", "z.py": "z\n"})
				git(t, dir, "config", "index.threads", "4")
				git(t, dir, "update-index", "--index-version", version)
				require.NoError(t, os.Remove(filepath.Join(dir, ".git", "index")))
				git(t, dir, "reset", "-q")
				path := filepath.Join(dir, ".git", "index")
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				ieot := bytes.Index(data, []byte("IEOT"))
				require.Positive(t, ieot, "%s writes an offset table", gittest.Describe())
				require.Equal(t, "EOIE", string(data[len(data)-20-32:len(data)-20-28]), "%s writes the end of entries last", gittest.Describe())
				if moved {
					// The second block starts where the first does:
					// a.py twice, and no run_agent.py, for git with
					// threads.
					copy(data[ieot+12+8:ieot+12+12], data[ieot+12:ieot+16])
					require.NoError(t, os.WriteFile(path, data, 0o644))
				}

				out, gitErr := gittest.Command(dir, "ls-files", "--error-unmatch", "--", "run_agent.py").CombinedOutput()
				c, _, err := Read(System, filepath.Join(dir, "run_agent.py"), true)
				if moved {
					require.Error(t, gitErr, "%s with threads reads other entries: %s", gittest.Describe(), out)
					assert.False(t, err == nil && c.Tracked, "%s does not find the module, the read does", gittest.Describe())
				} else {
					require.NoError(t, gitErr, "%s: %s", gittest.Describe(), out)
					require.NoError(t, err)
					assert.True(t, c.Tracked)
				}
			})
		}
	}
}
