package gitread

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// Installs without Git: a module that no Git checkout identifies (a
// release directory, a Docker image, a Nix store path, a desktop app's
// resources) is identified by what it is: its path with links resolved,
// the file itself, and the install's build stamp where there is one.

// Stamp says where an install's build stamp is, and what build it names.
type Stamp struct {
	// Name is the stamp's path, relative to Dir. Empty: the install has
	// no stamp, and its file alone identifies it.
	Name string
	// Dir is the directory the stamp is in, absolute. Empty: the module's
	// directory (links resolved).
	Dir string
	// Limit is the largest stamp read: a larger one names no build. Zero:
	// 1 MiB.
	Limit int64
	// Build returns the build the stamp's bytes name, or an error that
	// says why they name none.
	Build func(data []byte) (string, error)
}

// Install is what identifies a module that no Git checkout identifies.
type Install struct {
	// File names the module file (see fsread.FileID): a file renamed over
	// it has another name, a write in place keeps it. Empty when nothing,
	// or a directory, is at the module's path.
	File string
	// Stamp is the build stamp's path; empty where the install has none.
	Stamp string
	// NoBuild says why the stamp names no build, where it names none
	// (Checkout.Revision is then empty).
	NoBuild string
}

// readInstall resolves the configured module path abs and identifies what
// it leads to without Git, as stamp says; no Git file is read. A path
// that leads to nothing is an Install with no File.
func (r *reader) readInstall(abs string, stamp *Stamp) (Checkout, error) {
	mod, _, err := r.resolve(abs)
	if err != nil {
		return Checkout{}, err
	}
	r.addModule(mod)
	c := Checkout{SourceDir: filepath.Dir(mod), ModulePath: mod}
	return c, r.identify(&c, stamp)
}

// addModule records what is at the module's own name, as a dependency
// and for identify: not only the links on the way count, but a link put
// there (a deploy's rename) that leads elsewhere, a file made there where
// none was, and another file renamed over it.
func (r *reader) addModule(mod string) {
	r.module = r.step(mod).st
	r.addDep(mod, true, r.module)
}

// identify identifies the module of c without Git: its file (from the
// stamp addModule recorded, so that the answer is never newer than what
// a stat of its dependency compares), and the build the stamp names,
// which is c's Revision. A stamp that cannot be read, or says nothing
// usable, names no build, as to Hermes's own reader; what is at its path
// is a dependency all the same, so that a stamp written later is read. A
// stamp that changed while it was read is a read failure, which a bind
// reads again.
func (r *reader) identify(c *Checkout, stamp *Stamp) error {
	in := &Install{}
	c.Install = in
	if st := r.module; st.Present() && !st.IsDir() {
		id, err := fsread.FileID(c.ModulePath, st)
		if err != nil {
			return err
		}
		in.File = id
	}
	if !r.module.HasIdentity() {
		// Without an inode number in a stat (Windows), a file renamed
		// over the module with its size and times changes no stamp of
		// the module's: its directory's it does.
		st, err := r.fs.Lstat(c.SourceDir)
		if err != nil {
			return err
		}
		r.addDep(c.SourceDir, true, st)
	}
	if stamp.Name == "" {
		in.NoBuild = "the layout names no build stamp"
		return nil
	}
	path := filepath.Join(cmp.Or(stamp.Dir, c.SourceDir), stamp.Name)
	in.Stamp = path
	data, st, err := r.fs.ReadFile(path, cmp.Or(stamp.Limit, maxSmallFileBytes), false)
	if errors.Is(err, fsread.ErrChanged) {
		return err
	}
	if err != nil {
		readErr := err
		if st, err = r.fs.Stat(path); err != nil {
			return err
		}
		r.addDep(path, false, st)
		in.NoBuild = fmt.Sprintf("the build stamp %s cannot be read: %v", path, readErr)
		return nil
	}
	r.addDep(path, false, st)
	switch {
	case !st.Present():
		in.NoBuild = "no build stamp at " + path
	case st.IsDir():
		in.NoBuild = "the build stamp " + path + " is a directory"
	default:
		build, err := stamp.Build(data)
		if err != nil {
			in.NoBuild = fmt.Sprintf("the build stamp %s names no build: %v", path, err)
			return nil
		}
		c.Revision = build
	}
	return nil
}
