package gitread

import (
	"os"
	"path/filepath"
	"strings"
)

// Route is how the kernel reaches a path a read depends on.
type Route struct {
	// Resolved is where the path leads, every symbolic link resolved. A
	// part that is not there, or is not a directory though more follows,
	// ends the walk: the rest is taken as written.
	Resolved string
	// Links are the symbolic links followed on the way, in order, each
	// named by the directory it is in (links resolved) and its name: a
	// link re-pointed changes the entry of that name.
	Links []string
}

// step is what one part of a path is: its stamp, not following it, and
// for a symbolic link the link's text.
type step struct {
	st     Stamp
	target string
	err    error
}

// step looks at the part next (its directory's links resolved), once per
// read: every walk of the read that passes it takes the same answer.
func (r *reader) step(next string) step {
	if s, ok := r.steps[next]; ok {
		return s
	}
	var s step
	s.st, s.err = r.fs.Lstat(next)
	if s.err == nil && s.st.IsLink() {
		s.target, s.err = os.Readlink(next)
	}
	if r.steps == nil {
		r.steps = map[string]step{}
	}
	r.steps[next] = s
	return s
}

// saw records what a look at next of the read's own found (a stamp not
// following a link, and a link's text), so that a walk passing it later
// in the read takes the same answer without looking again.
func (r *reader) saw(next string, st Stamp, target string) {
	if r.steps == nil {
		r.steps = map[string]step{}
	}
	r.steps[next] = step{st: st, target: target}
}

// walkEnd says where a walk ended.
type walkEnd int

const (
	walkDone    walkEnd = iota // at the end of the path
	walkMissing                // at a part that is not there
	walkNotDir                 // at a part that is not a directory, with more to come
	walkLoop                   // at a link past maxLinks
)

// walked is where a walk ended: resolved is the part walked (links
// resolved); at the part it stopped at, and rest what came after it.
type walked struct {
	resolved, at, rest string
	end                walkEnd
}

// walk follows every symbolic link of the absolute path p, component by
// component as the kernel does ("." is skipped, ".." leads to the parent
// of the part walked so far, a link's text is walked in its place,
// relative to its directory), and calls link for each link it passes. It
// stops at the first part that is not there, at a part that is not a
// directory with more to come, and at a link past maxLinks. An error is a
// part that could not be looked at.
func (r *reader) walk(p string, link func(path string, st Stamp)) (walked, error) {
	vol := filepath.VolumeName(p)
	w := walked{rest: p[len(vol):], resolved: vol + string(filepath.Separator)}
	links := 0
	for w.rest != "" {
		var comp string
		comp, w.rest = cutComponent(w.rest)
		switch comp {
		case "", ".":
			continue
		case "..":
			w.resolved = filepath.Dir(w.resolved)
			continue
		}
		next := filepath.Join(w.resolved, comp)
		s := r.step(next)
		w.at = next
		if s.err != nil {
			return w, s.err
		}
		switch {
		case !s.st.Present():
			w.end = walkMissing
			return w, nil
		case s.st.IsLink():
			link(next, s.st)
			if links++; links > maxLinks {
				w.end = walkLoop
				return w, nil
			}
			target := s.target
			if filepath.IsAbs(target) {
				v := filepath.VolumeName(target)
				w.resolved, target = v+string(filepath.Separator), target[len(v):]
			}
			w.rest = target + string(filepath.Separator) + w.rest
		case !s.st.IsDir() && trimSeparators(w.rest) != "":
			w.end = walkNotDir
			return w, nil
		default:
			w.resolved = next
		}
	}
	return w, nil
}

// route walks p, not failing: a part that ends the walk, or cannot be
// looked at, is kept with the rest as written.
func (r *reader) route(p string) Route {
	var rt Route
	w, err := r.walk(p, func(link string, _ Stamp) { rt.Links = append(rt.Links, link) })
	switch {
	case err == nil && w.end == walkDone:
		rt.Resolved = w.resolved
	case w.end == walkLoop:
		rt.Resolved = filepath.Join(w.resolved, w.rest)
	default:
		rt.Resolved = filepath.Join(w.at, w.rest)
	}
	return rt
}

// trimSeparators is p without leading and trailing separators: empty when
// nothing but separators is left of a path.
func trimSeparators(p string) string { return strings.Trim(p, string(filepath.Separator)) }
