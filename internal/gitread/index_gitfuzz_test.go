package gitread

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// indexExtSigs are the signatures FuzzIndexAgainstGit gives the extension
// it adds: optional, required, read by git, and the ones git reads
// elsewhere or not at all.
var indexExtSigs = []string{"ZZZZ", "zzzz", "TREE", "REUC", "UNTR", "FSMN", "EOIE", "IEOT", "sdir", "link", "Z\x00\x00\x00"}

// FuzzIndexAgainstGit: an index git wrote (versions 2 to 4, a.py,
// run_agent.py and z.py), changed in the shapes git reads otherwise than
// it writes (bytes after the checksum, an extension of any size, extended
// flags in any version, a name's length in its flags against its NUL, a
// version 4 prefix, the file cut or a byte set anywhere, the offset
// tables git reads the entries by with index.threads), reads as git
// ls-files --error-unmatch reads it: never tracked where git does not
// find it, and tracked where git does, unless the read refuses what git
// reads past the end of the file or copies unterminated, or tables of
// offsets that git may read otherwise with other threads or another hash.
func FuzzIndexAgainstGit(f *testing.F) {
	if _, err := exec.LookPath("git"); err != nil {
		f.Skip("git is not installed")
	}
	// Versions 2 to 4, then the same read and written by git with
	// index.threads: with the tables of offsets it reads them by.
	var indexes [6][]byte
	var dirs [6]string
	for v := range 6 {
		version := string(rune('2' + v%3))
		dirs[v] = filepath.Join(tempDir(f), "v"+version)
		initRepo(f, dirs[v], map[string]string{"a.py": "a\n", "run_agent.py": "x\n", "z.py": "z\n"})
		gittest.Git(f, dirs[v], "update-index", "--index-version", version)
		if v >= 3 {
			gittest.Git(f, dirs[v], "config", "index.threads", "4")
			if err := os.Remove(filepath.Join(dirs[v], ".git", "index")); err != nil {
				f.Fatal(err)
			}
			gittest.Git(f, dirs[v], "reset", "-q")
		}
		data, err := os.ReadFile(filepath.Join(dirs[v], ".git", "index"))
		if err != nil {
			f.Fatal(err)
		}
		indexes[v] = data
	}
	// Its seeds are in testdata/fuzz/FuzzIndexAgainstGit, named for
	// the shape each makes.
	f.Fuzz(func(t *testing.T, version, shape uint8, at uint16, value uint32) {
		v := int(version) % 6
		data := append([]byte(nil), indexes[v]...)
		n := int(at)
		switch shape % 8 {
		case 0: // bytes after the checksum
			data = append(data, make([]byte, n%24)...)
		case 1: // an extension before the checksum
			sig := indexExtSigs[n%len(indexExtSigs)]
			data = withExtension(data, sig, value)
		case 2: // extended flags on an entry
			off := indexEntryFlags(t, data)[n%3]
			if binary.BigEndian.Uint16(data[off:])&indexExtended != 0 {
				return
			}
			data[off] |= indexExtended >> 8
			// The word after the flags is read as the extended ones.
		case 3: // an entry's name length in its flags
			off := indexEntryFlags(t, data)[n%3]
			flags := binary.BigEndian.Uint16(data[off:])
			binary.BigEndian.PutUint16(data[off:], flags&^indexNameMask|uint16(int(flags&indexNameMask)+int(int8(value)))&indexNameMask)
		case 4: // a version 4 prefix (another byte in other versions)
			data[indexEntryFlags(t, data)[n%3]+2] = byte(value)
		case 5: // the file cut short
			data = data[:n%len(data)]
		case 6: // a byte set anywhere
			data[n%len(data)] = byte(value)
		case 7: // a word of the offset tables (the last extensions) set
			off := len(data) - 20 - 4 - n%64
			if off < 0 || bytes.LastIndex(data, []byte("IEOT")) < 0 {
				return
			}
			binary.BigEndian.PutUint32(data[off:], value)
		}
		path := filepath.Join(dirs[v], ".git", "index")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.WriteFile(path, indexes[v], 0o644); err != nil {
				t.Fatal(err)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "git", "ls-files", "--error-unmatch", "--", "run_agent.py")
		cmd.Dir, cmd.Env = dirs[v], gittest.Env
		out, gitErr := cmd.CombinedOutput()
		c, _, err := Read(System, filepath.Join(dirs[v], "run_agent.py"), true)
		switch {
		case gitErr != nil && err == nil && c.Tracked:
			t.Fatalf("index %q: git ls-files does not find the module (%v: %s), the read finds it tracked", data, gitErr, out)
		case gitErr == nil && err == nil && !c.Tracked:
			t.Fatalf("index %q: git ls-files finds the module, the read does not", data)
		case gitErr == nil && err != nil && !errors.Is(err, errIndexTruncated) && !errors.Is(err, errIndexUnterminated) &&
			!errors.Is(err, errIndexExtPastEnd) && !errors.Is(err, errIndexPrefix) && !errors.Is(err, errSplitIndex) && !errors.Is(err, errIndexThreads):
			t.Fatalf("index %q: git ls-files finds the module, the read fails: %v", data, err)
		}
	})
}
