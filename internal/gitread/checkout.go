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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// Size limits for the files a read opens: larger ones are refused, never
// read whole.
const (
	// HEAD, loose refs, .git files, commondir: Git's own bound on a .git
	// file (read_gitfile_gently in setup.c); Git reads the others at any
	// size, and whatever trails what it parses of them (see docs/git.md).
	maxSmallFileBytes = 1 << 20
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

	// Install, for a read that identified the module without Git (see
	// Ask.Stamp), is what identifies it: Revision is then the commit its
	// build stamp names, or empty. Nil for a read of Git.
	Install *Install
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

// Ask is what a read asks for beyond Read's answer.
type Ask struct {
	// MustExist makes a module path that leads to nothing, or to a
	// directory, an error.
	MustExist bool
	// Prev is an earlier read's index, whose answer is taken again where
	// it still holds (see ReadAgain); the read returns the index it found.
	Prev *Index
	// Routes asks for the route of each dependency (see Route).
	Routes bool
	// Stamp, where not nil, asks for the identity of the module without
	// Git (see Install): its file and the build the stamp Stamp says
	// names. No Git file is read, and a module path that leads to
	// nothing is an Install with no File.
	Stamp *Stamp
}

// ReadWith is Read with what ask asks for besides: the routes of the
// dependencies, the index, or in place of Git the identity of the module
// without it.
func ReadWith(fs *FS, abs string, ask Ask) (Checkout, Deps, []Route, *Index, error) {
	r := reader{fs: fs, prevIndex: ask.Prev}
	if ask.Routes {
		r.steps = map[string]step{}
	}
	var c Checkout
	var err error
	if ask.Stamp != nil {
		c, err = r.readInstall(abs, ask.Stamp)
	} else {
		c, err = r.read(abs, ask.MustExist)
	}
	deps := r.deps.unique()
	if err != nil {
		return c, deps, nil, nil, err
	}
	var rs []Route
	if ask.Routes {
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
	// module is what the read found at the module's own name, not
	// following a link (see addModule).
	module fsread.Stamp
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
	r.addModule(mod)
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
	format, bare, err := r.locate(&c)
	if err != nil {
		return c, err
	}
	c.ObjectFormat = format.objectFormat
	r.reftable = format.reftable
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

// Location is where git's discovery, started in a directory, finds the
// repository that holds it: the answer of [Locate].
type Location struct {
	// TopLevel is the top-level directory of the worktree (the one
	// core.worktree names, where it names one), empty where no worktree
	// holds the directory.
	TopLevel string
	// DotGit is the .git the discovery took: a Git directory, or a file
	// naming one, in the directory git found it in.
	DotGit string
	// GitDir is the Git directory, CommonDir the one holding the shared
	// refs and config (git rev-parse --git-dir and --git-common-dir).
	GitDir, CommonDir string
}

// Locate finds the repository that holds dir (absolute) as git's
// discovery, started in dir, finds it: the first .git up the tree that git
// accepts (a Git directory, or a gitdir file naming one, through links;
// a .git that is no Git directory passed over), its commondir, and
// core.worktree and core.bare where git honours them. A directory that no
// worktree holds is the zero Location. A repository whose config cannot
// be read (a format this package does not read) is an error, with the
// Location of the Git directory found: its DotGit, GitDir and CommonDir,
// and the TopLevel core.worktree may have moved; any other failure is an
// error with the zero Location.
func Locate(dir string) (Location, error) {
	r := reader{fs: System}
	c := Checkout{SourceDir: filepath.Clean(dir)}
	if err := r.findWorktree(&c); err != nil || c.TopLevel == "" {
		return Location{}, err
	}
	l := Location{TopLevel: c.TopLevel, DotGit: filepath.Join(c.TopLevel, ".git"), GitDir: c.GitDir, CommonDir: c.CommonDir}
	if _, _, err := r.locate(&c); err != nil {
		return l, err
	}
	l.TopLevel = c.TopLevel
	return l, nil
}

// locate reads the format of the repository findWorktree found for c,
// and moves c.TopLevel to the worktree core.worktree names where git
// honours it; bare is core.bare where git honours it.
func (r *reader) locate(c *Checkout) (format repoFormat, bare bool, err error) {
	config, err := r.readConfig(filepath.Join(c.CommonDir, "config"))
	if err != nil {
		return format, false, err
	}
	format, err = parseRepoFormat(config)
	if err != nil {
		return format, false, fmt.Errorf("%s: %w", c.CommonDir, err)
	}
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
			return format, false, err
		}
		if err := format.worktreeOverrides(data); err != nil {
			return format, false, fmt.Errorf("%s: %w", path, err)
		}
		hasCommon = false
	}
	bare = format.bareSet && format.bare && !hasCommon
	if format.worktreeSet && !hasCommon && !bare {
		if c.TopLevel, err = r.gitPath(c.GitDir, format.worktree); err != nil {
			return format, false, fmt.Errorf("core.worktree: %w", err)
		}
	}
	return format, bare, nil
}
