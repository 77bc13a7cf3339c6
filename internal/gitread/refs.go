package gitread

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// HEAD and the refs it names: loose refs, symbolic refs, and whether a
// repository has any.

// headName fills in the ref HEAD names, for diagnostics of a checkout
// whose revision does not matter: nothing it reads is a dependency, and a
// HEAD that cannot be read leaves it empty.
func (r *reader) headName(c *Checkout, hashLen int) {
	scratch, head := reader{fs: r.fs, reftable: r.reftable}, *c
	if _, err := scratch.resolveHead(&head, hashLen); err == nil {
		c.Head = head.Head
	}
}

// looseRef is what a loose ref path holds.
type looseRef struct {
	found  bool   // a file or a symbolic ref is there
	notDir bool   // nothing, as a part of the path is not a directory
	symref string // the ref it names, for a symbolic ref
	data   []byte // the file's content, for anything else found
}

// readRef reads the loose ref at path as Git's files backend does: a
// symbolic link whose text is a ref name ("refs/...") is a symbolic ref to
// that name; any other link is followed and what it leads to read; a
// directory, or nothing, means the ref is not loose (packed-refs may have
// it); a path that changes type while it is read is read again.
func (r *reader) readRef(path string) (looseRef, error) {
	for try := 0; try < maxRefRetries; try++ {
		st, err := r.fs.Lstat(path)
		if err != nil {
			return looseRef{}, err
		}
		if !st.IsLink() {
			r.saw(path, st, "")
		}
		switch {
		case !st.Present() || st.IsDir():
			r.addDep(path, true, st)
			return looseRef{notDir: st.NotDir()}, nil
		case st.IsLink():
			target, err := os.Readlink(path)
			if err != nil {
				continue // gone or no longer a link since the lstat
			}
			r.saw(path, st, target)
			r.addDep(path, true, st)
			if strings.HasPrefix(target, "refs/") && validRefName(target) {
				return looseRef{found: true, symref: target}, nil
			}
			data, fst, err := r.fs.ReadFile(path, maxSmallFileBytes, false)
			if err != nil {
				return looseRef{}, err
			}
			r.addDep(path, false, fst)
			if !fst.Present() || fst.IsDir() {
				return looseRef{}, &fs.PathError{Op: "read", Path: path, Err: errors.New("a symbolic link that leads nowhere")}
			}
			return looseRef{found: true, data: data}, nil
		}
		data, fst, err := r.fs.ReadFile(path, maxSmallFileBytes, true)
		if err != nil {
			if fsread.IsLinkLoop(err) {
				continue // became a link since the lstat
			}
			return looseRef{}, err
		}
		if !fst.Present() || fst.IsDir() {
			continue // removed or replaced since the lstat
		}
		r.addDep(path, true, fst)
		return looseRef{found: true, data: data}, nil
	}
	return looseRef{}, &fs.PathError{Op: "read", Path: path, Err: fsread.ChangedError("changed type while it was read")}
}

// parseLooseRef is Git's parse_loose_ref_contents: "ref:" and a ref name,
// or an object id followed by nothing or white space.
func parseLooseRef(data []byte, hashLen int) (symref, oid string, ok bool) {
	data = cString(bytes.TrimRight(data, gitSpace))
	if rest, sym := bytes.CutPrefix(data, []byte("ref:")); sym {
		return string(bytes.TrimLeft(rest, gitSpace)), "", true
	}
	if len(data) < hashLen || !isObjectID(string(data[:hashLen]), hashLen) ||
		(len(data) > hashLen && !strings.ContainsRune(gitSpace, rune(data[hashLen]))) {
		return "", "", false
	}
	return "", strings.ToLower(string(data[:hashLen])), true
}

// resolveHead follows HEAD through symbolic refs to an object id, reading
// loose refs first and packed-refs for a ref that has no loose file, at
// most maxSymrefDepth refs deep. A ref found nowhere is an unborn branch:
// the revision stays empty. It returns packed-refs when it read it.
func (r *reader) resolveHead(c *Checkout, hashLen int) (packed []byte, err error) {
	if r.reftable {
		return nil, r.resolveHeadReftable(c, hashLen)
	}
	name := "HEAD"
	packedRead := false
	for depth := 0; depth < maxSymrefDepth; depth++ {
		dir := c.CommonDir
		if perWorktreeRef(name) {
			dir = c.GitDir
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		ref, err := r.readRef(path)
		if err != nil {
			return packed, err
		}
		if ref.found {
			target, oid := ref.symref, ""
			if target == "" {
				var ok bool
				if target, oid, ok = parseLooseRef(ref.data, hashLen); !ok {
					return packed, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("not a ref: neither \"ref:\" nor a %d-digit object id", hashLen)}
				}
			}
			if oid != "" {
				c.Revision = oid
				return packed, nil
			}
			if !validRefName(target) {
				return packed, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%q is not a valid ref name", target)}
			}
			if depth == 0 {
				c.Head = target
			}
			name = target
			continue
		}
		if name == "HEAD" {
			return packed, &fs.PathError{Op: "read", Path: path, Err: fs.ErrNotExist}
		}
		if ref.notDir {
			// Git's files backend goes on to packed-refs for a ref that
			// does not exist (ENOENT) or is a directory, not for one a
			// file is in the way of (ENOTDIR): the ref resolves to nothing.
			return packed, nil
		}
		if !packedRead {
			if err := r.checkEnds(filepath.Join(c.CommonDir, "packed-refs"), packedEnds); err != nil {
				return packed, err
			}
			packed, _, err = r.readFile(filepath.Join(c.CommonDir, "packed-refs"), maxPackedRefs)
			if err != nil {
				return packed, err
			}
			packedRead = true
		}
		oid, err := lookupPackedRef(packed, name, hashLen)
		if err != nil {
			return packed, &contentError{fmt.Errorf("%s: %w", filepath.Join(c.CommonDir, "packed-refs"), err)}
		}
		c.Revision = oid
		return packed, nil
	}
	return packed, fmt.Errorf("HEAD: symbolic refs nested deeper than %d", maxSymrefDepth)
}

// hasRefs reports whether the repository has any ref: a line in
// packed-refs, or a file or link under refs/. Nothing it reads is a
// dependency: it only tells a fresh repository's unborn branch from a
// branch that is missing for an instant while it is renamed (a
// repository whose only branch is renamed has HEAD's reflog to tell).
func hasRefs(commonDir string, packed []byte) (bool, error) {
	for _, line := range bytes.Split(packed, []byte("\n")) {
		if len(line) > 0 && line[0] != '#' && line[0] != '^' {
			return true, nil
		}
	}
	found := false
	err := filepath.WalkDir(filepath.Join(commonDir, "refs"), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found, err
}

// perWorktreeRef reports whether a ref lives in the worktree's own Git
// directory rather than the common one (gitrepository-layout(5)).
func perWorktreeRef(name string) bool {
	return !strings.Contains(name, "/") ||
		strings.HasPrefix(name, "refs/worktree/") ||
		strings.HasPrefix(name, "refs/bisect/") ||
		strings.HasPrefix(name, "refs/rewritten/")
}

// validRefName accepts what git-check-ref-format accepts for a full ref
// name, and top-level pseudo-refs of capitals and underscores. It keeps a
// hostile symbolic ref from naming a path outside the Git directory.
func validRefName(name string) bool {
	if !strings.HasPrefix(name, "refs/") {
		if name == "" {
			return false
		}
		for _, c := range name {
			if (c < 'A' || c > 'Z') && c != '_' {
				return false
			}
		}
		return true
	}
	if strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.Contains(name, "//") || strings.Contains(name, "@{") {
		return false
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return false
		}
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part[0] == '.' || strings.HasSuffix(part, ".lock") {
			return false
		}
	}
	return true
}

func isObjectID(s string, hashLen int) bool {
	if len(s) != hashLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// IsRevision reports whether s is a full hex object id: 40 digits (SHA-1)
// or 64 (SHA-256).
func IsRevision(s string) bool {
	return (len(s) == 40 || len(s) == 64) && isObjectID(s, len(s))
}
