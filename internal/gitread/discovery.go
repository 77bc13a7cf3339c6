package gitread

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// Discovery: from the module's directory up to the Git directory and
// worktree that hold it, as git's setup finds them.

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
