package runtimeguard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Size limits for the files a read opens: larger ones are refused, never
// read whole.
const (
	maxSmallFileBytes = 64 << 10 // HEAD, loose refs, .git files, commondir
	maxConfigBytes    = 32 << 20 // the repository config (Git stops at 2 GiB)
	maxPackedRefs     = 1 << 30
	maxIndexBytes     = 1 << 30
	maxSymrefDepth    = 5 // Git's SYMREF_MAXDEPTH
)

// Checkout is what one full read of a module's checkout found: the answer
// of [Inspect], for diagnostics. Revision is empty unless the module is
// tracked in a worktree whose HEAD names a commit; Reason then says why.
type Checkout struct {
	// SourceDir is the module's directory, absolute, links resolved.
	SourceDir string
	// ModulePath is the module file, absolute, links resolved.
	ModulePath string
	// TopLevel is the top-level directory of the worktree that holds
	// SourceDir, or empty when there is none.
	TopLevel string
	// GitDir is the worktree's Git directory (for a linked worktree or a
	// submodule, the one its .git file names); CommonDir holds the shared
	// refs and config.
	GitDir, CommonDir string
	// ObjectFormat is "sha1" or "sha256".
	ObjectFormat string
	// Tracked reports whether the index tracks ModulePath.
	Tracked bool
	// Head is the ref HEAD points at, such as "refs/heads/main"; empty when
	// HEAD is detached.
	Head string
	// Revision is the full hex object id HEAD resolves to.
	Revision string
	// Reason says why Revision is empty.
	Reason string
}

// ReadRevision returns the full hex object id of HEAD of the Git worktree
// that holds sourceDir, provided modulePath lies in that worktree and its
// index tracks it (compared literally, without pathspec magic). An empty
// revision with a nil error means "not a tracked Git checkout": no worktree,
// a module outside it or untracked, or an unborn branch. An error means the
// checkout could not be read; it names the format when the repository uses
// one this package does not read (such as reftable refs or a split index).
//
// ReadRevision reads the files itself: it runs no git process, no hook and
// no configured command, and does not depend on Git's safe.directory rule.
func ReadRevision(sourceDir, modulePath string) (string, error) {
	c, err := readCheckout(sourceDir, modulePath)
	return c.Revision, err
}

// Inspect reads the checkout that holds modulePath the way a guard bound to
// it would, and reports everything it found.
func Inspect(modulePath string) (Checkout, error) {
	module, err := resolveModule(modulePath)
	if err != nil {
		return Checkout{}, err
	}
	return readCheckout(filepath.Dir(module), module)
}

func readCheckout(sourceDir, modulePath string) (Checkout, error) {
	src, err := resolvePath(sourceDir)
	if err != nil {
		return Checkout{}, err
	}
	mod, err := resolvePath(modulePath)
	if err != nil {
		return Checkout{}, err
	}
	r := reader{stat: statStamp}
	c, err := r.read(src, mod)
	if err != nil {
		return c, fmt.Errorf("runtimeguard: read %s: %w", src, err)
	}
	return c, nil
}

// resolveModule makes a module path absolute with symbolic links resolved,
// and requires that it exists.
func resolveModule(modulePath string) (string, error) {
	if modulePath == "" {
		return "", errors.New("runtimeguard: empty module path")
	}
	abs, err := filepath.Abs(modulePath)
	if err != nil {
		return "", fmt.Errorf("runtimeguard: module path: %w", err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("runtimeguard: module path: %w", err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("runtimeguard: module path: %w", err)
	}
	if fi.IsDir() {
		return "", &fs.PathError{Op: "runtimeguard: module path", Path: resolved, Err: errors.New("is a directory")}
	}
	return resolved, nil
}

// resolvePath makes a path absolute with links resolved; a missing final
// element is kept as it is, so a deleted module still names its place.
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("runtimeguard: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		return resolved, nil
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", fmt.Errorf("runtimeguard: %w", err)
	}
	return filepath.Join(dir, filepath.Base(abs)), nil
}

// dep is one file an answer depends on, with its stamp when it was read. A
// stamp that is not present records that nothing was at the path.
type dep struct {
	path string
	st   stamp
}

// reader performs one full read and records every file the answer depends
// on, stamped from the open descriptor it was read through, so that a stamp
// is never newer than the content read.
type reader struct {
	stat func(string) (stamp, error)
	deps []dep
}

// readFile reads a regular file of at most limit bytes. ok is false when
// nothing, or a directory, is at path.
func (r *reader) readFile(path string, limit int64) (data []byte, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
			r.deps = append(r.deps, dep{path: path})
			return nil, false, nil
		}
		return nil, false, err
	}
	defer f.Close()
	st, err := fstatStamp(f)
	if err != nil {
		return nil, false, err
	}
	r.deps = append(r.deps, dep{path, st})
	if st.dir {
		return nil, false, nil
	}
	if st.size > limit {
		return nil, false, fmt.Errorf("%s: %d bytes is over the limit of %d", path, st.size, limit)
	}
	var buf bytes.Buffer
	buf.Grow(int(st.size) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, false, err
	}
	if int64(buf.Len()) > limit {
		return nil, false, fmt.Errorf("%s: grew over the limit of %d bytes", path, limit)
	}
	return buf.Bytes(), true, nil
}

func (r *reader) read(src, mod string) (Checkout, error) {
	c := Checkout{SourceDir: src, ModulePath: mod, ObjectFormat: "sha1"}
	if err := r.findWorktree(&c); err != nil || c.TopLevel == "" {
		return c, err
	}
	rel, err := filepath.Rel(c.TopLevel, mod)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		c.Reason = "the module is outside the worktree " + c.TopLevel
		return c, nil
	}
	config, _, err := r.readConfig(filepath.Join(c.CommonDir, "config"))
	if err != nil {
		return c, err
	}
	format, err := parseRepoFormat(config)
	if err != nil {
		return c, fmt.Errorf("%s: %w", c.CommonDir, err)
	}
	c.ObjectFormat = format.objectFormat

	index, ok, err := r.readFile(filepath.Join(c.GitDir, "index"), maxIndexBytes)
	if err != nil {
		return c, fmt.Errorf("read index: %w", err)
	}
	if ok {
		c.Tracked, err = indexHasPath(index, filepath.ToSlash(rel), format.hashLen)
		if err != nil {
			return c, fmt.Errorf("%s: %w", filepath.Join(c.GitDir, "index"), err)
		}
	}
	if !c.Tracked {
		c.Reason = "the module is not tracked in the index of " + c.TopLevel
		return c, nil
	}
	if err := r.resolveHead(&c, format.hashLen); err != nil {
		return c, err
	}
	if c.Revision == "" {
		c.Reason = "HEAD names the unborn branch " + c.Head
	}
	return c, nil
}

// readConfig reads a config file, which the answer does not depend on for
// the fast path: a repository's format does not change while its HEAD, refs
// and index stay untouched.
func (r *reader) readConfig(path string) ([]byte, bool, error) {
	n := len(r.deps)
	data, ok, err := r.readFile(path, maxConfigBytes)
	r.deps = r.deps[:n]
	return data, ok, err
}

// findWorktree walks up from the source directory to the first .git, as
// Git's discovery does. Every level without one is a dependency: a .git that
// appears there would change the answer.
func (r *reader) findWorktree(c *Checkout) error {
	for dir := c.SourceDir; ; {
		dotgit := filepath.Join(dir, ".git")
		st, err := r.stat(dotgit)
		if err != nil {
			return err
		}
		switch {
		case st.present && st.dir:
			c.TopLevel, c.GitDir, c.CommonDir = dir, dotgit, dotgit
			return nil
		case st.present:
			c.TopLevel = dir
			return r.followGitFile(c, dotgit)
		}
		r.deps = append(r.deps, dep{path: dotgit})
		parent := filepath.Dir(dir)
		if parent == dir {
			c.Reason = "no Git worktree holds " + c.SourceDir
			return nil
		}
		dir = parent
	}
}

// followGitFile reads a .git file ("gitdir: PATH", written for linked
// worktrees, submodules and separate Git directories) and the commondir file
// of the directory it names.
func (r *reader) followGitFile(c *Checkout, dotgit string) error {
	data, ok, err := r.readFile(dotgit, maxSmallFileBytes)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s changed while it was read", dotgit)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	target, found := strings.CutPrefix(line, "gitdir:")
	target = strings.TrimSpace(target)
	if !found || target == "" {
		return fmt.Errorf("%s is not a gitdir file", dotgit)
	}
	c.GitDir = joinRelative(filepath.Dir(dotgit), target)
	c.CommonDir = c.GitDir
	common, ok, err := r.readFile(filepath.Join(c.GitDir, "commondir"), maxSmallFileBytes)
	if err != nil {
		return err
	}
	if ok {
		if p := strings.TrimSpace(string(common)); p != "" {
			c.CommonDir = joinRelative(c.GitDir, p)
		}
	}
	return nil
}

// isNotDir reports an error for a path through something that is not a
// directory: nothing can be at such a path.
func isNotDir(err error) bool {
	return errors.Is(err, syscall.ENOTDIR)
}

func joinRelative(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// resolveHead follows HEAD through symbolic refs to an object id, reading
// loose refs first and packed-refs for a ref that has no loose file. A ref
// found nowhere is an unborn branch: the revision stays empty.
func (r *reader) resolveHead(c *Checkout, hashLen int) error {
	name := "HEAD"
	var packed []byte
	packedRead := false
	for depth := 0; depth <= maxSymrefDepth; depth++ {
		dir := c.CommonDir
		if perWorktreeRef(name) {
			dir = c.GitDir
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		data, ok, err := r.readFile(path, maxSmallFileBytes)
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if ok {
			text := strings.TrimSpace(string(data))
			if target, sym := strings.CutPrefix(text, "ref:"); sym {
				target = strings.TrimSpace(target)
				if !validRefName(target) {
					return fmt.Errorf("%s: %q is not a valid ref name", path, target)
				}
				if depth == 0 {
					c.Head = target
				}
				name = target
				continue
			}
			oid, _, _ := strings.Cut(text, " ")
			oid, _, _ = strings.Cut(oid, "\t")
			if !isObjectID(oid, hashLen) {
				return fmt.Errorf("%s does not hold a %d-digit object id", path, hashLen)
			}
			c.Revision = strings.ToLower(oid)
			return nil
		}
		if name == "HEAD" {
			return fmt.Errorf("%s has no HEAD", c.GitDir)
		}
		if !packedRead {
			packed, _, err = r.readFile(filepath.Join(c.CommonDir, "packed-refs"), maxPackedRefs)
			if err != nil {
				return fmt.Errorf("read packed-refs: %w", err)
			}
			packedRead = true
		}
		oid, err := lookupPackedRef(packed, name, hashLen)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(c.CommonDir, "packed-refs"), err)
		}
		c.Revision = oid
		return nil
	}
	return fmt.Errorf("HEAD: symbolic refs nested deeper than %d", maxSymrefDepth)
}

// lookupPackedRef finds name in a packed-refs file. It returns an empty id
// when the ref is not there.
func lookupPackedRef(data []byte, name string, hashLen int) (string, error) {
	needle := " " + name
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 || line[0] == '#' || line[0] == '^' {
			continue
		}
		if len(line) != hashLen+len(needle) || string(line[hashLen:]) != needle {
			continue
		}
		oid := string(line[:hashLen])
		if !isObjectID(oid, hashLen) {
			return "", fmt.Errorf("the entry for %s does not hold a %d-digit object id", name, hashLen)
		}
		return strings.ToLower(oid), nil
	}
	return "", nil
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
