// Package gitread reads what a runtime guard needs of a Git checkout from
// the files themselves, without running git: the revision of HEAD, whether
// the index tracks a module, and every file the answer depends on, stamped,
// so that a later stat proves nothing changed.
//
// Every file is read with care: stat before open, non-blocking opens,
// regular files only, a buffer of the size fstat reports plus one byte
// (the index, of any size, through a buffer of its own: see scanIndex).
// Where the repository uses a format this package does not read, the error
// matches errors.ErrUnsupported.
package gitread

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// Size limits for the files a read opens: larger ones are refused, never
// read whole.
const (
	maxSmallFileBytes = 64 << 10 // HEAD, loose refs, .git files, commondir
	maxConfigBytes    = 32 << 20 // the repository config (Git stops at 2 GiB)
	maxPackedRefs     = 1 << 30
	maxIndexBytes     = 1 << 30
	maxSymrefDepth    = 5  // Git's SYMREF_MAXDEPTH: refs read to resolve HEAD
	maxLinks          = 40 // links followed to resolve a path (Linux's MAXSYMLINKS)
	maxRefRetries     = 3  // a ref that changes type while read is read again
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
	// ObjectFormat is "sha1" or "sha256"; empty when there is no
	// repository.
	ObjectFormat string
	// Tracked reports whether the index tracks ModulePath.
	Tracked bool
	// Head is the ref HEAD points at, such as "refs/heads/main"; empty when
	// HEAD is detached or there is no repository.
	Head string
	// Revision is the full hex object id HEAD resolves to.
	Revision string
	// Reason says why Revision is empty.
	Reason string

	// Transient is set for an unborn branch in a repository that has other
	// refs: the state a branch rename passes through.
	Transient bool
}

// ReadRevision returns the full hex object id of HEAD of the Git worktree
// that holds sourceDir, provided modulePath lies in that worktree and its
// index tracks it (compared literally, without pathspec magic). An empty
// revision with a nil error means "not a tracked Git checkout": no worktree,
// a module outside it or untracked, or an unborn branch. An error means the
// checkout could not be read; it names the format when the repository uses
// one this package does not read (such as a split index).
//
// ReadRevision reads the files itself: it runs no git process, no hook and
// no configured command, and does not depend on Git's safe.directory rule.
func ReadRevision(sourceDir, modulePath string) (string, error) {
	src, err := ResolvePath(sourceDir)
	if err != nil {
		return "", err
	}
	mod, err := ResolvePath(modulePath)
	if err != nil {
		return "", err
	}
	r := reader{fs: System}
	c, err := r.readAt(src, mod)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", src, err)
	}
	return c.Revision, nil
}

// Inspect reads the checkout that holds modulePath the way a guard bound to
// it would, and reports everything it found.
func Inspect(modulePath string) (Checkout, error) {
	abs, err := Abs(modulePath)
	if err != nil {
		return Checkout{}, err
	}
	r := reader{fs: System}
	c, err := r.read(abs, true)
	if err != nil {
		if c.ModulePath == "" {
			return c, err
		}
		return c, fmt.Errorf("read %s: %w", c.SourceDir, err)
	}
	return c, nil
}

// Abs makes a configured module path absolute. On Unix it is not cleaned:
// a ".." after a symbolic link leads to the parent of the link's target,
// as the kernel (and the interpreter that loads the module) resolves it,
// not to the directory the link is in; the resolution, link by link, does
// the rest. On Windows, where the system itself removes ".." from a path
// before it follows anything, it is cleaned.
func Abs(modulePath string) (string, error) {
	if modulePath == "" {
		return "", errors.New("empty module path")
	}
	if runtime.GOOS == "windows" {
		abs, err := filepath.Abs(modulePath)
		if err != nil {
			return "", fmt.Errorf("module path: %w", err)
		}
		return abs, nil
	}
	if filepath.IsAbs(modulePath) {
		return modulePath, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("module path: %w", err)
	}
	return wd + string(filepath.Separator) + modulePath, nil
}

// ResolvePath makes a path absolute (see Abs) with links resolved; a
// missing final element is kept as it is, so a deleted module still names
// its place.
func ResolvePath(p string) (string, error) {
	abs, err := Abs(p)
	if err != nil {
		return "", err
	}
	r := reader{fs: System}
	resolved, _, err := r.resolve(abs)
	if err != nil {
		return "", err
	}
	return resolved, nil
}

// Dep is one file an answer depends on, with its stamp when it was read. A
// stamp that is not present records that nothing was at the path. A
// NoFollow dep is stamped by lstat: a symbolic link itself, a loose ref, a
// directory on the way to the module.
type Dep struct {
	Path     string
	NoFollow bool
	// Identity, for a directory whose entries do not matter (a Git
	// directory's objects and refs), compares what is at Path, not its
	// timestamps: a commit that adds an object directory reads nothing
	// again. Where a stamp has no inode number it is the whole stamp.
	// What git asks of such a directory, access(2) for X_OK, is asked
	// again too: it depends on the owner, the group, the mode and any ACL,
	// and an ACL changed in place changes nothing of the stamp but its
	// change time.
	Identity bool
	Stamp    fsread.Stamp
	// searchable is what access(2) for X_OK said of an Identity dep.
	searchable bool
}

// Deps are the files one read depended on.
type Deps []Dep

// Unchanged reports whether every dependency still has the stamp it had.
func (d Deps) Unchanged(fs *FS) bool {
	for i := range d {
		if !d[i].Unchanged(fs) {
			return false
		}
	}
	return true
}

// Unchanged reports whether the dependency still has the stamp it had.
func (d *Dep) Unchanged(fs *FS) bool {
	stat := fs.Stat
	if d.NoFollow {
		stat = fs.Lstat
	}
	st, err := stat(d.Path)
	if err != nil || !(st == d.Stamp || d.Identity && st.SameIdentity(d.Stamp)) {
		return false
	}
	return !d.Identity || fsread.Searchable(d.Path, st) == d.searchable
}

// Settled reports whether every stamp can be trusted to change if its file
// changes after readStart: see Stamp.Settled.
func (d Deps) Settled(readStart time.Time) bool {
	for i := range d {
		if !(d[i].Identity && d[i].Stamp.HasIdentity()) && !d[i].Stamp.Settled(readStart) {
			return false
		}
	}
	return true
}

// unique drops repeated dependencies: a file read twice with the same
// stamp needs one stat.
func (d Deps) unique() Deps {
	out := d[:0:0]
	for _, x := range d {
		seen := false
		for _, o := range out {
			if o == x {
				seen = true
				break
			}
		}
		if !seen {
			out = append(out, x)
		}
	}
	return out
}

// FS is what a read touches of the file system, replaceable for tests.
type FS struct {
	// Stat and Lstat stamp a path, following a final link or not; nothing
	// at the path is a stamp that is not present.
	Stat, Lstat func(path string) (fsread.Stamp, error)
	// ReadFile reads a Git file whole: see fsread.ReadRegular.
	ReadFile func(path string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error)
	// Open, when not nil, opens a Git file for one read from its start to
	// its end (see fsread.OpenRegular): a large index is read through a
	// buffer, not whole. Without it, ReadFile reads it.
	Open func(path string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error)
	// ReadEnds, when not nil, reads the first and last bytes of a file
	// (see ReadEnds): a large index or packed-refs whose ends cannot be
	// one's is refused without being read whole.
	ReadEnds func(path string, n int, nofollow bool) (head, tail []byte, st fsread.Stamp, err error)
}

// System is the file system itself.
var System = &FS{Stat: fsread.StatStamp, Lstat: fsread.LstatStamp, ReadFile: fsread.ReadRegular, Open: openRegular, ReadEnds: fsread.SystemReadEnds}

// openRegular is fsread.OpenRegular, with nothing there (or a directory)
// a nil ReadCloser, its Stamp saying which.
func openRegular(path string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
	f, st, err := fsread.OpenRegular(path, limit, nofollow)
	if f == nil {
		return nil, st, err
	}
	return f, st, nil
}

// headBytes is how much of each end of a large index or packed-refs is
// read, and checked, before the whole.
const headBytes = 4096

// contentError is a read failure decided by what files the read depends
// on say (each recorded in its Deps): while none of them changes, a read
// again fails the same way.
type contentError struct{ err error }

func (e *contentError) Error() string { return e.err.Error() }
func (e *contentError) Unwrap() error { return e.err }

// FromContent reports whether err is a read failure decided by the content
// of files recorded in the read's Deps: while they are unchanged, the
// same read fails the same way, and need not be made again.
func FromContent(err error) bool {
	var ce *contentError
	return errors.As(err, &ce)
}

// checkEnds reads the ends of the file at path when it is larger than
// twice headBytes and refuses it, recorded as a dependency, when check
// says they cannot be what it should: a file that would fail its parse is
// not read whole (a file made sparse, zeros after its content, say).
func (r *reader) checkEnds(path string, check func(head, tail []byte, size int64) error) error {
	if r.fs.ReadEnds == nil {
		return nil
	}
	head, tail, st, err := r.fs.ReadEnds(path, headBytes, false)
	if err != nil || !st.Regular() || st.Size() <= 2*headBytes || len(head) == 0 || len(tail) == 0 {
		return nil // the whole read says what is wrong, or costs little
	}
	if err := check(head, tail, st.Size()); err != nil {
		r.addDep(path, false, st)
		return &contentError{&fs.PathError{Op: "read", Path: path, Err: err}}
	}
	return nil
}

// indexHead refuses an index whose header is not one, or whose entries
// cannot fit in its size.
func indexHead(hashLen int) func(head, tail []byte, size int64) error {
	return func(head, _ []byte, size int64) error {
		switch {
		case len(head) < indexHeaderBytes || string(head[:4]) != "DIRC":
			return errors.New("index has no DIRC signature")
		case binary.BigEndian.Uint32(head[4:8]) < 2 || binary.BigEndian.Uint32(head[4:8]) > 4:
			return fmt.Errorf("index version %d: %w", binary.BigEndian.Uint32(head[4:8]), errors.ErrUnsupported)
		}
		if count := int64(binary.BigEndian.Uint32(head[8:12])); indexHeaderBytes+count*int64(indexStatBytes+hashLen/2+2) > size {
			return errors.New("index is truncated")
		}
		return nil
	}
}

// packedEnds refuses a packed-refs whose last line is not terminated:
// git's packed backend refuses it too (a file grown with zeros, say).
func packedEnds(_, tail []byte, _ int64) error {
	if tail[len(tail)-1] != '\n' {
		return errors.New("the last line is not terminated")
	}
	return nil
}

// Read resolves the configured module path abs (absolute, as Abs makes it:
// on Unix not cleaned, so that a ".." after a link is the parent of its
// target; links unresolved) and reads the checkout that holds what it leads to,
// returning every file the answer depends on. With mustExist, a module path
// that leads to nothing, or to a directory, is an error. A panic is not
// recovered here.
func Read(fs *FS, abs string, mustExist bool) (Checkout, Deps, error) {
	r := reader{fs: fs}
	c, err := r.read(abs, mustExist)
	return c, r.deps.unique(), err
}

// Routed is Read that also returns the route of each dependency, in the
// order of Deps: every symbolic link the kernel follows to reach it, and
// where it leads (see Route); none when the read failed. A watch of what
// the answer depends on is planned from them.
func Routed(fs *FS, abs string, mustExist bool) (Checkout, Deps, []Route, error) {
	c, deps, routes, _, err := ReadWith(fs, abs, mustExist, nil, true)
	return c, deps, routes, err
}

// ReadWith is Read with what a caller asks for besides: the routes of the
// dependencies where routes is true (see Routed), and the answer of prev,
// an earlier read's index, taken again where it still holds (see
// ReadAgain), with the index this read found.
func ReadWith(fs *FS, abs string, mustExist bool, prev *Index, routes bool) (Checkout, Deps, []Route, *Index, error) {
	r := reader{fs: fs, prevIndex: prev}
	if routes {
		r.steps = map[string]step{}
	}
	c, err := r.read(abs, mustExist)
	deps := r.deps.unique()
	if err != nil {
		return c, deps, nil, nil, err
	}
	var rs []Route
	if routes {
		rs = make([]Route, len(deps))
		for i := range deps {
			rs[i] = r.route(deps[i].Path)
		}
	}
	return c, deps, rs, r.index, nil
}

// Routes returns the route of each of paths (absolute), walked through fs
// now (see Route): for files a read does not find, such as an updater's,
// whose watch is planned as a read's is.
func Routes(fs *FS, paths []string) []Route {
	r := reader{fs: fs, steps: map[string]step{}}
	routes := make([]Route, len(paths))
	for i, p := range paths {
		routes[i] = r.route(p)
	}
	return routes
}

// reader performs one full read and records every file the answer depends
// on, stamped from the open descriptor it was read through, so that a Stamp
// is never newer than the content read.
type reader struct {
	fs   *FS
	deps Deps
	// reftable: the refs are in reftable stacks (see reftable.go); stack
	// is the common one, once read.
	reftable bool
	stack    *rtStack
	// steps are the parts of paths a read that records routes walked,
	// each looked at once (see step); routes the routes it found (see
	// route). Nil for a read that records none.
	steps  map[string]step
	routes map[string]routed
	// prevIndex is an earlier read's index, whose answer is taken again
	// where the index is unchanged; index is the one this read found.
	prevIndex, index *Index
}

func (r *reader) addDep(path string, nofollow bool, st fsread.Stamp) {
	r.deps = append(r.deps, Dep{Path: path, NoFollow: nofollow, Stamp: st})
}

// addIdentityDep records that the answer depends on what is at path (links
// followed), not on its timestamps, and on whether access(2) finds it
// searchable, as it was.
func (r *reader) addIdentityDep(path string, st fsread.Stamp, searchable bool) {
	r.deps = append(r.deps, Dep{Path: path, Identity: true, Stamp: st, searchable: searchable})
}

// readFile reads the regular file at path, following links, and records
// it. ok is false when nothing, or a directory, is at path.
func (r *reader) readFile(path string, limit int64) (data []byte, ok bool, err error) {
	data, st, err := r.fs.ReadFile(path, limit, false)
	if err != nil {
		return nil, false, err
	}
	r.addDep(path, false, st)
	return data, st.Present() && !st.IsDir(), nil
}

// resolve follows every symbolic link of the absolute path p, component by
// component as the kernel does (see walk), and records each link it
// passes: a link re-pointed later changes the answer. A missing final
// component is kept as it is (exists is false); a missing directory on
// the way is an error.
func (r *reader) resolve(p string) (resolved string, exists bool, err error) {
	w, err := r.walk(p, func(link string, st fsread.Stamp) { r.addDep(link, true, st) })
	if err != nil {
		return "", false, err
	}
	more := trimSeparators(w.rest) != ""
	switch w.end {
	case walkMissing:
		if more {
			return "", false, &fs.PathError{Op: "resolve", Path: w.at, Err: fs.ErrNotExist}
		}
		return w.at, false, nil
	case walkNotDir:
		return "", false, &fs.PathError{Op: "resolve", Path: w.at, Err: errNotDir}
	case walkLoop:
		return "", false, &fs.PathError{Op: "resolve", Path: p, Err: errLinkLoop}
	}
	return w.resolved, true, nil
}

// cutComponent splits the first path component off p.
func cutComponent(p string) (comp, rest string) {
	p = strings.TrimLeft(p, string(filepath.Separator))
	if i := strings.IndexByte(p, filepath.Separator); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}

// read resolves the configured module path abs and reads the checkout
// that holds what it leads to. With mustExist, a module path that leads to
// nothing, or to a directory, is an error.
func (r *reader) read(abs string, mustExist bool) (Checkout, error) {
	mod, exists, err := r.resolve(abs)
	if err != nil {
		if mustExist {
			return Checkout{}, &noModuleError{err}
		}
		return Checkout{}, err
	}
	// What is at the module's own name counts, not only the links on the
	// way: a link put there (a deploy's rename) leads elsewhere, and a
	// file made there where none was is the module found.
	r.addDep(mod, true, r.step(mod).st)
	if mustExist {
		st, err := r.fs.Stat(mod)
		switch {
		case err != nil:
			return Checkout{}, err
		case !exists || !st.Present():
			return Checkout{}, &fs.PathError{Op: "resolve", Path: abs, Err: &noModuleError{fs.ErrNotExist}}
		case st.IsDir():
			return Checkout{}, &fs.PathError{Op: "resolve", Path: abs, Err: &noModuleError{errIsDir}}
		}
	}
	return r.readAt(filepath.Dir(mod), mod)
}

// ErrNoModule is the class of a module path that leads to no file, or to
// a directory.
var ErrNoModule = errors.New("the module path leads to no file")

// noModuleError is a failure of the ErrNoModule class.
type noModuleError struct{ err error }

func (e *noModuleError) Error() string { return e.err.Error() }

// Unwrap gives the cause and the class.
func (e *noModuleError) Unwrap() []error { return []error{e.err, ErrNoModule} }

// Path resolution failures.
var (
	errIsDir    = errors.New("is a directory")
	errNotDir   = errors.New("not a directory")
	errLinkLoop = fmt.Errorf("more than %d symbolic links", maxLinks)
)

func (r *reader) readAt(src, mod string) (Checkout, error) {
	c := Checkout{SourceDir: src, ModulePath: mod}
	if err := r.findWorktree(&c); err != nil || c.TopLevel == "" {
		return c, err
	}
	config, err := r.readConfig(filepath.Join(c.CommonDir, "config"))
	if err != nil {
		return c, err
	}
	format, err := parseRepoFormat(config)
	if err != nil {
		return c, fmt.Errorf("%s: %w", c.CommonDir, err)
	}
	c.ObjectFormat = format.objectFormat
	r.reftable = format.reftable
	// core.bare and core.worktree count only where the Git directory has
	// no commondir (git ignores both in a linked worktree), or under
	// extensions.worktreeConfig. With core.bare
	// true git has no worktree (core.worktree is then ignored): it still
	// reads HEAD and the index, but matches ls-files' paths from the top
	// level, whatever the directory it runs in, so the module is tracked
	// when the index holds its file name at the top level. core.worktree
	// names the worktree, relative to the Git directory: the .git found
	// only led to the repository.
	hasCommon := c.CommonDir != c.GitDir
	if format.worktreeConfig {
		// extensions.worktreeConfig: git reads core.bare and
		// core.worktree from the Git directory's config.worktree too, and
		// honours them (and the repository config's) in a linked
		// worktree as well.
		path := filepath.Join(c.GitDir, "config.worktree")
		data, err := r.readConfig(path)
		if err != nil {
			return c, err
		}
		if err := format.worktreeOverrides(data); err != nil {
			return c, fmt.Errorf("%s: %w", path, err)
		}
		hasCommon = false
	}
	bare := format.bareSet && format.bare && !hasCommon
	switch {
	case bare:
		// ls-files then matches the module's name from the top level,
		// whatever the directory it runs in.
	case format.worktreeSet && !hasCommon:
		if c.TopLevel, err = r.gitPath(c.GitDir, format.worktree); err != nil {
			return c, fmt.Errorf("core.worktree: %w", err)
		}
	}

	rel, err := filepath.Rel(c.TopLevel, mod)
	if bare && err == nil {
		rel = filepath.Base(mod)
	}
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		c.Reason = "the module is outside the worktree " + c.TopLevel
		r.headName(&c, format.hashLen)
		return c, nil
	}
	if c.Tracked, err = r.indexTracks(filepath.Join(c.GitDir, "index"), filepath.ToSlash(rel), format.hashLen); err != nil {
		return c, err
	}
	if !c.Tracked {
		c.Reason = "the module is not tracked in the index of " + c.TopLevel
		r.headName(&c, format.hashLen)
		return c, nil
	}
	packed, err := r.resolveHead(&c, format.hashLen)
	if err != nil {
		return c, err
	}
	if c.Revision == "" {
		c.Reason = "HEAD names the unborn branch " + c.Head
		if r.reftable {
			c.Transient, err = r.stack.hasRefs()
			return c, err
		}
		if c.Transient, err = hasRefs(c.CommonDir, packed); err != nil {
			return c, err
		}
		// A repository with only one branch has no other ref while it
		// renames it; HEAD's reflog says a commit was made here before.
		if fi, err := os.Lstat(filepath.Join(c.GitDir, "logs", "HEAD")); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
			c.Transient = true
		}
	}
	return c, nil
}

// Index is what a read found in a worktree's index for the module: whether
// it tracks it, for an index of one stamp, read with one object format.
// A later read that finds the index with the same stamp takes the answer
// again instead of reading the index (see ReadAgain).
type Index struct {
	path    string // the index file
	rel     string // the module's path in it
	hashLen int
	stamp   fsread.Stamp
	tracked bool
}

// Settled reports whether the index's stamp can be trusted to change if
// the index changes after readStart, when the read that found it began
// (see fsread.Stamp.Settled): only such an answer may be taken again.
func (x *Index) Settled(readStart time.Time) bool { return x.stamp.Settled(readStart) }

// ReadAgain is Read, taking the answer of prev, the index of an earlier
// read, where the index it would read is the one prev read (the same
// file, module path and object format) and a stat of it finds prev's
// stamp: the index is then not read again. The caller passes only a prev
// whose stamp was settled when its read began (see Index.Settled): an
// index rewritten within its timestamp's tick keeps its stamp. It returns
// the index this read found, read or taken again; nil when it found none.
func ReadAgain(fs *FS, abs string, mustExist bool, prev *Index) (Checkout, Deps, *Index, error) {
	c, deps, _, index, err := ReadWith(fs, abs, mustExist, prev, false)
	return c, deps, index, err
}

// indexTracks reports whether the index at path tracks rel, taking the
// answer of the earlier read's index where a stat finds it unchanged, else
// reading it through a buffer (or whole, where the FS cannot stream).
func (r *reader) indexTracks(path, rel string, hashLen int) (bool, error) {
	if p := r.prevIndex; p != nil && p.path == path && p.rel == rel && p.hashLen == hashLen {
		if st, err := r.fs.Stat(path); err == nil && st == p.stamp {
			r.addDep(path, false, st)
			r.index = p
			return p.tracked, nil
		}
	}
	if err := r.checkEnds(path, indexHead(hashLen)); err != nil {
		return false, err
	}
	var (
		found, ok bool
		st        fsread.Stamp
		err       error
	)
	if r.fs.Open != nil {
		found, st, ok, err = r.streamIndex(path, rel, hashLen)
	} else {
		var data []byte
		if data, st, err = r.fs.ReadFile(path, maxIndexBytes, false); err != nil {
			return false, err
		}
		r.addDep(path, false, st)
		if ok = st.Present() && !st.IsDir(); ok {
			found, err = indexHasPath(data, rel, hashLen)
			if err != nil && !errors.Is(err, fsread.ErrChanged) {
				err = &contentError{fmt.Errorf("%s: %w", path, err)}
			}
		}
	}
	if err != nil || !ok {
		return false, err
	}
	r.index = &Index{path: path, rel: rel, hashLen: hashLen, stamp: st, tracked: found}
	return found, nil
}

// streamIndex reads the index at path through a buffer: see scanIndex.
// ok is false when nothing, or a directory, is there.
func (r *reader) streamIndex(path, rel string, hashLen int) (found bool, st fsread.Stamp, ok bool, err error) {
	f, st, err := r.fs.Open(path, maxIndexBytes, false)
	if err != nil {
		return false, st, false, err
	}
	r.addDep(path, false, st)
	if f == nil {
		return false, st, false, nil
	}
	defer f.Close()
	buf := indexBufs.Get().(*[]byte)
	defer indexBufs.Put(buf)
	at, _ := f.(io.ReaderAt)
	found, srcErr, err := scanIndex(f, at, st.Size(), rel, hashLen, *buf)
	switch {
	case srcErr != nil:
		return false, st, true, srcErr
	case err != nil:
		return false, st, true, &contentError{fmt.Errorf("%s: %w", path, err)}
	}
	return found, st, true, nil
}

// readConfig reads a config file and records it. A missing one is an
// empty config to git; a directory is one it cannot read.
func (r *reader) readConfig(path string) ([]byte, error) {
	data, st, err := r.fs.ReadFile(path, maxConfigBytes, false)
	if err != nil {
		return nil, err
	}
	r.addDep(path, false, st)
	if st.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errIsDir}
	}
	return data, nil
}

// headName fills in the ref HEAD names, for diagnostics of a checkout
// whose revision does not matter: nothing it reads is a dependency, and a
// HEAD that cannot be read leaves it empty.
func (r *reader) headName(c *Checkout, hashLen int) {
	scratch, head := reader{fs: r.fs, reftable: r.reftable}, *c
	if _, err := scratch.resolveHead(&head, hashLen); err == nil {
		c.Head = head.Head
	}
}

// findWorktree walks up from the source directory to the first .git that
// Git's discovery accepts: a Git directory, or a regular file naming one.
// A directory that is no Git directory, or a dangling link, is passed
// over, as Git passes over it; a FIFO, socket or device is a read failure,
// as it is to git 2.54 and later (earlier versions pass it over).
//
// Every directory passed on the way is a dependency, stamped without
// following links: a .git created in it changes its modification time, and
// a directory replaced by another, or by a link, changes its identity.
func (r *reader) findWorktree(c *Checkout) error {
	oneFS := !acrossFileSystems()
	var device uint64
	for dir := c.SourceDir; ; {
		dotgit := filepath.Join(dir, ".git")
		found, err := r.probeDotGit(c, dir, dotgit)
		if err != nil || found {
			return err
		}
		st, err := r.fs.Lstat(dir)
		if err != nil {
			return err
		}
		r.addDep(dir, true, st)
		if dir == c.SourceDir {
			device = st.Dev()
		}
		// Where no .git makes dir a worktree, git takes dir itself for a
		// bare repository when it is a Git directory: the module then is
		// in no worktree.
		if bare, err := r.isBare(dir); err != nil || bare {
			if bare {
				c.Reason = "git finds the bare repository " + dir + " before any worktree holding " + c.SourceDir
			}
			return err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			c.Reason = "no Git worktree holds " + c.SourceDir
			return nil
		}
		// Git stops at a file system boundary, unless
		// GIT_DISCOVERY_ACROSS_FILESYSTEM says otherwise: a mount placed
		// on the way to the module takes it out of the worktree.
		if oneFS {
			pst, err := r.fs.Lstat(parent)
			if err != nil {
				return err
			}
			if pst.Present() && pst.Dev() != device {
				r.addDep(parent, true, pst)
				c.Reason = "no Git worktree holds " + c.SourceDir + " on its file system (git stops at the mount point " + dir + ")"
				return nil
			}
		}
		dir = parent
	}
}

// acrossFileSystems is GIT_DISCOVERY_ACROSS_FILESYSTEM as git reads it.
func acrossFileSystems() bool {
	switch strings.ToLower(os.Getenv("GIT_DISCOVERY_ACROSS_FILESYSTEM")) {
	case "true", "yes", "on", "1":
		return true
	}
	return false
}

// probeDotGit decides whether dotgit makes dir a worktree's top level.
func (r *reader) probeDotGit(c *Checkout, dir, dotgit string) (bool, error) {
	lst, err := r.fs.Lstat(dotgit)
	if err != nil || !lst.Present() {
		return false, err // nothing there: the directory's fsread.Stamp covers it
	}
	if !lst.IsLink() {
		r.saw(dotgit, lst, "")
	}
	st, err := r.fs.Stat(dotgit)
	if err != nil {
		return false, err
	}
	switch {
	case st.Present() && st.IsDir():
		why, err := r.isGitDir(dotgit)
		if err != nil {
			return false, err
		}
		if why != "" {
			r.addDep(dotgit, false, st)
			return false, nil
		}
		c.TopLevel, c.GitDir = dir, dotgit
		c.CommonDir, err = r.commonDir(dotgit)
		return true, err
	case st.Present() && st.Regular():
		c.TopLevel = dir
		return true, r.followGitFile(c, dotgit)
	}
	r.addDep(dotgit, false, st)
	if st.Present() {
		// A FIFO, a socket or a device (or a link to one): git before
		// 2.54 passes it over, later versions die "not a regular file".
		// Where one supported git fails, no answer is current.
		return false, &fs.PathError{Op: "read", Path: dotgit, Err: fmt.Errorf("%w, which git 2.54 and later refuse", &fsread.TypeError{Kind: "special file"})}
	}
	return false, nil // a dangling link: nothing, to every git
}

// isBare reports whether git, finding no .git in dir, takes dir for a bare
// repository. Nothing named HEAD in dir is the common case, and needs no
// dependency of its own: a HEAD made in dir changes dir's stamp.
func (r *reader) isBare(dir string) (bool, error) {
	st, err := r.fs.Lstat(filepath.Join(dir, "HEAD"))
	if err != nil || !st.Present() {
		return false, err
	}
	why, err := r.isGitDir(dir)
	return why == "" && err == nil, err
}

// isGitDir is Git's is_git_directory: HEAD is a valid HEAD, and the common
// directory's objects and refs pass access(2) for X_OK (a directory, or an
// executable file: git asks no more). It returns why dir is not a Git
// directory, or "" when it is. What it looks at is recorded, so that a
// directory passed over because it was no Git directory is read again once
// it becomes one, and one taken for a Git directory is read again once it
// is no longer one (objects moved away).
func (r *reader) isGitDir(dir string) (why string, err error) {
	if why, err := r.validHead(filepath.Join(dir, "HEAD")); why != "" || err != nil {
		return why, err
	}
	common, err := r.commonDir(dir)
	if err != nil {
		return "", err
	}
	for _, sub := range [...]string{"objects", "refs"} {
		p := filepath.Join(common, sub)
		st, err := r.fs.Stat(p)
		if err != nil {
			return "", err
		}
		ok := st.Present() && fsread.Searchable(p, st)
		r.addIdentityDep(p, st, ok)
		if !st.Present() {
			return p + " does not exist", nil
		}
		if !ok {
			return p + " fails access(2) for X_OK", nil
		}
	}
	return "", nil
}

// validHead is Git's validate_headref: HEAD is a link whose text starts
// with "refs/", or a file holding "ref: refs/..." or an object id. It
// returns why the HEAD at path is not valid, or "" when it is. Nothing, a
// directory or anything else there is no valid HEAD; a special file is a
// read failure.
func (r *reader) validHead(path string) (why string, err error) {
	st, err := r.fs.Lstat(path)
	if err != nil {
		return "", err
	}
	if !st.IsLink() {
		r.saw(path, st, "")
	}
	r.addDep(path, true, st)
	switch {
	case !st.Present():
		return path + " does not exist", nil
	case st.IsDir():
		return path + " is a directory", nil
	case st.IsLink():
		target, err := os.Readlink(path)
		if err != nil || !strings.HasPrefix(target, "refs/") {
			return fmt.Sprintf("%s is a symbolic link to %q, not to a ref", path, target), nil
		}
		return "", nil
	}
	data, fst, err := r.fs.ReadFile(path, maxSmallFileBytes, true)
	if err != nil {
		return "", err
	}
	if !fst.Present() || fst.IsDir() {
		return path + " changed while it was read", nil
	}
	if len(data) > 255 { // Git reads 255 bytes of it
		data = data[:255]
	}
	data = cString(data)
	if rest, ok := bytes.CutPrefix(data, []byte("ref:")); ok && bytes.HasPrefix(bytes.TrimLeft(rest, gitSpace), []byte("refs/")) {
		return "", nil
	}
	if len(data) >= 40 && isObjectID(string(data[:40]), 40) {
		return "", nil
	}
	return path + " holds neither a ref nor an object id", nil
}

// gitSpace is what Git's own isspace accepts (git-compat-util.h): not
// the C library's, which adds \v and \f.
const gitSpace = " \t\n\r"

// commonDir is the directory holding the shared refs and config of the Git
// directory gitDir: the one its commondir file names, else gitDir itself.
func (r *reader) commonDir(gitDir string) (string, error) {
	path := filepath.Join(gitDir, "commondir")
	data, st, err := r.fs.ReadFile(path, maxSmallFileBytes, false)
	if err != nil {
		return gitDir, err
	}
	r.addDep(path, false, st)
	switch {
	case !st.Present():
		return gitDir, nil
	case st.IsDir() || len(data) == 0:
		// Git reads a commondir that is there or dies: a directory, or
		// a file of no bytes, fails every git command.
		return gitDir, &fs.PathError{Op: "read", Path: path, Err: errors.New("a directory or an empty file, which git cannot read")}
	}
	p := string(cString([]byte(strings.TrimRight(string(data), "\r\n"))))
	if p == "" {
		return gitDir, nil
	}
	common, err := r.gitPath(gitDir, p)
	if err != nil {
		return gitDir, fmt.Errorf("%s: %w", path, err)
	}
	return common, nil
}

// followGitFile reads a .git file ("gitdir: PATH", written for linked
// worktrees, submodules and separate Git directories) as Git does: the
// text after "gitdir: " to the end, trailing line ends removed, relative to
// the file's directory; what it names must be a Git directory.
func (r *reader) followGitFile(c *Checkout, dotgit string) error {
	data, ok, err := r.readFile(dotgit, maxSmallFileBytes)
	if err != nil {
		return err
	}
	if !ok {
		return &fs.PathError{Op: "read", Path: dotgit, Err: fsread.ChangedError("changed while it was read")}
	}
	target, found := strings.CutPrefix(string(cString([]byte(strings.TrimRight(string(data), "\r\n")))), "gitdir: ")
	if !found || target == "" {
		return &fs.PathError{Op: "read", Path: dotgit, Err: errors.New("not a gitdir file")}
	}
	if c.GitDir, err = r.gitPath(filepath.Dir(dotgit), target); err != nil {
		return fmt.Errorf("%s: %w", dotgit, err)
	}
	why, err := r.isGitDir(c.GitDir)
	if err != nil {
		return err
	}
	if why != "" {
		return &fs.PathError{Op: "read", Path: dotgit, Err: fmt.Errorf("%s is not a Git directory: %s", c.GitDir, why)}
	}
	c.CommonDir, err = r.commonDir(c.GitDir)
	return err
}

// gitPath resolves a path that one of Git's own files holds (a .git
// file's gitdir, a commondir, core.worktree), relative to base, as git
// resolves it (realpath, chdir): link by link, so that a ".." after a
// link leads to the parent of the link's target, as the kernel takes it,
// not to the directory the link is in (see Abs). Each link passed is a
// dependency. A missing final component is kept as it is.
func (r *reader) gitPath(base, p string) (string, error) {
	joined := p
	switch {
	case runtime.GOOS == "windows":
		// The system removes ".." before it follows anything.
		joined = joinRelative(base, p)
	case !filepath.IsAbs(p):
		joined = base + string(filepath.Separator) + p
	}
	resolved, _, err := r.resolve(joined)
	return resolved, err
}

func joinRelative(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
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

// lookupPackedRef finds name in a packed-refs file as Git's packed backend
// does (packed-backend.c, Git 2.39), so that it finds what git finds, or
// fails where git dies: the header, when there is one, must start
// "# pack-refs with: " (git 2.50 and later need the space; a header
// without it, which earlier versions read, is refused as one they read
// differently); the last line must end in a newline and hold at
// least an object id, a separator and one byte; a file whose header does
// not say "sorted" has every record checked that way and is sorted by ref
// name; then the ref is found by git's binary search over the bytes. A ref
// that a file not declared sorted lists twice is an error: which of the
// two git's sort puts where is not defined. It returns an empty id when
// the ref is not there.
func lookupPackedRef(data []byte, name string, hashLen int) (string, error) {
	buf, sorted, err := packedRecords(data)
	if err != nil {
		return "", err
	}
	if len(buf) > 0 {
		last := recordStart(buf, len(buf)-1)
		if buf[len(buf)-1] != '\n' || len(buf)-last < hashLen+2 {
			return "", errPackedLine
		}
	}
	if !sorted {
		if buf, err = sortPackedRecords(buf, name, hashLen); err != nil {
			return "", err
		}
	}
	lo, hi := 0, len(buf)
	for lo != hi {
		mid := lo + (hi-lo)/2
		rec := lo + recordStart(buf[lo:], mid-lo)
		cmp, ok := cmpRecordToName(buf[rec:], name, hashLen)
		switch {
		case !ok:
			return "", errPackedLine
		case cmp < 0:
			lo = mid + recordEnd(buf[mid:hi], 0)
		case cmp > 0:
			hi = rec
		default:
			if len(buf)-rec < hashLen || !isObjectID(string(buf[rec:rec+hashLen]), hashLen) {
				return "", fmt.Errorf("the entry for %s does not hold a %d-digit object id", name, hashLen)
			}
			return strings.ToLower(string(buf[rec : rec+hashLen])), nil
		}
	}
	return "", nil
}

// errPackedTwice is a ref a packed-refs file not declared sorted lists
// twice: git sorts the records with the C library's qsort, stable in some
// versions and not in others, so which of the two it finds is not defined.
var errPackedTwice = errors.New("listed twice in a packed-refs file not declared sorted: which entry git reads is not defined")

// errPackedHeaderSpace is a header with no space after "with:": git
// before 2.50 reads the file, later versions die on it.
var errPackedHeaderSpace = fmt.Errorf("a header without a space after \"with:\", which git 2.50 and later refuse: %w", ErrGitsDisagree)

// errPackedLine is git's "unexpected line in packed-refs" and
// "unterminated line in packed-refs".
var errPackedLine = errors.New("an unexpected or unterminated line, which git refuses")

// packedRecords splits off the header of a packed-refs file and reports
// whether it says the records are sorted.
func packedRecords(data []byte) (records []byte, sorted bool, err error) {
	if len(data) == 0 || data[0] != '#' {
		return data, false, nil
	}
	eol := bytes.IndexByte(data, '\n')
	if eol < 0 {
		return nil, false, errPackedLine
	}
	traits, ok := bytes.CutPrefix(data[:eol], []byte("# pack-refs with:"))
	if !ok {
		return nil, false, errPackedLine
	}
	if !bytes.HasPrefix(traits, []byte(" ")) {
		return nil, false, errPackedHeaderSpace
	}
	// git splits the traits as a C string: they end at a NUL.
	if i := bytes.IndexByte(traits, 0); i >= 0 {
		traits = traits[:i]
	}
	for _, t := range bytes.Split(traits, []byte(" ")) {
		sorted = sorted || string(t) == "sorted"
	}
	return data[eol+1:], sorted, nil
}

// sortPackedRecords is git's sort_snapshot: every record (a line, and a
// peeled "^" line after it) must be at least an object id, a separator and
// one byte long; the records are put in the order of their ref names.
func sortPackedRecords(buf []byte, name string, hashLen int) ([]byte, error) {
	var recs [][]byte
	for pos := 0; pos < len(buf); {
		eol := bytes.IndexByte(buf[pos:], '\n')
		if eol < 0 || eol < hashLen+2 {
			return nil, errPackedLine
		}
		end := pos + eol + 1
		if end < len(buf) && buf[end] == '^' {
			peel := bytes.IndexByte(buf[end:], '\n')
			if peel < 0 {
				return nil, errPackedLine
			}
			end += peel + 1
		}
		recs = append(recs, buf[pos:end])
		pos = end
	}
	refName := func(rec []byte) []byte { return rec[hashLen+1 : bytes.IndexByte(rec, '\n')] }
	slices.SortStableFunc(recs, func(a, b []byte) int { return bytes.Compare(refName(a), refName(b)) })
	out := make([]byte, 0, len(buf))
	for i, rec := range recs {
		if i > 0 && string(refName(rec)) == name && string(refName(recs[i-1])) == name {
			return nil, fmt.Errorf("%s: %w", name, errPackedTwice)
		}
		out = append(out, rec...)
	}
	return out, nil
}

// recordStart is git's find_start_of_record: from p back to the start of
// the line, and past a peeled "^" line to the record it belongs to.
func recordStart(buf []byte, p int) int {
	for p > 0 && (buf[p-1] != '\n' || buf[p] == '^') {
		p--
	}
	return p
}

// recordEnd is git's find_end_of_record: the offset just past the record
// that holds p (a peeled line included).
func recordEnd(buf []byte, p int) int {
	for p++; p < len(buf) && (buf[p-1] != '\n' || buf[p] == '^'); p++ {
	}
	return p
}

// cmpRecordToName is git's cmp_record_to_refname: the record's ref name,
// after the object id and one separator byte, up to the newline, against
// name, bytewise. ok is false for a record too short to hold a name,
// where git would read past it.
func cmpRecordToName(rec []byte, name string, hashLen int) (cmp int, ok bool) {
	if len(rec) <= hashLen+1 {
		return 0, false
	}
	r := rec[hashLen+1:]
	for i := 0; ; i++ {
		if i >= len(r) {
			return 0, false
		}
		if r[i] == '\n' {
			if i < len(name) {
				return -1, true
			}
			return 0, true
		}
		if i >= len(name) {
			return 1, true
		}
		if r[i] != name[i] {
			if r[i] < name[i] {
				return -1, true
			}
			return 1, true
		}
	}
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
