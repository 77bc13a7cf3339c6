package gitread

import (
	"github.com/runtimeguard/runtimeguard/internal/fsread"
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
	st     fsread.Stamp
	target string
	err    error
}

// step looks at the part next (its directory's links resolved). A read
// that records routes looks at each part once: every walk of the read
// that passes it takes the same answer.
func (r *reader) step(next string) step {
	if s, ok := r.steps[next]; ok {
		return s
	}
	var s step
	s.st, s.err = r.fs.Lstat(next)
	if s.err == nil && s.st.IsLink() {
		s.target, s.err = os.Readlink(next)
	}
	if r.steps != nil {
		r.steps[next] = s
	}
	return s
}

// saw records what a look at next of the read's own found (a stamp not
// following a link, and a link's text), so that a walk passing it later
// in the read takes the same answer without looking again.
func (r *reader) saw(next string, st fsread.Stamp, target string) {
	if r.steps != nil {
		r.steps[next] = step{st: st, target: target}
	}
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
func (r *reader) walk(p string, link func(path string, st fsread.Stamp)) (walked, error) {
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

// routed is a route, and whether it ends at a directory, from which the
// route of a path below it goes on.
type routed struct {
	Route
	dir bool
}

// route is the route of the absolute path p, not failing: a part that ends
// the walk, or cannot be looked at, is kept with the rest as written. The
// route of each directory is found once per read: a path's route is its
// directory's, and one more part.
func (r *reader) route(p string) Route {
	if r.steps == nil {
		r.steps = map[string]step{}
	}
	if r.routes == nil {
		r.routes = map[string]routed{}
	}
	return r.routeOf(filepath.Clean(p)).Route
}

func (r *reader) routeOf(p string) routed {
	if rt, ok := r.routes[p]; ok {
		return rt
	}
	parent := filepath.Dir(p)
	if parent == p { // the root
		return routed{Route: Route{Resolved: p}, dir: true}
	}
	var rt routed
	switch pr := r.routeOf(parent); {
	case !pr.dir: // the walk ended above: the rest as written
		rt = routed{Route: Route{Resolved: filepath.Join(pr.Resolved, filepath.Base(p)), Links: pr.Links}}
	default:
		next := filepath.Join(pr.Resolved, filepath.Base(p))
		if s := r.step(next); s.err == nil && s.st.IsLink() {
			rt = r.walkRoute(p)
		} else {
			rt = routed{Route: Route{Resolved: next, Links: pr.Links}, dir: s.err == nil && s.st.IsDir()}
		}
	}
	r.routes[p] = rt
	return rt
}

// walkRoute is the route of p by a walk of the whole of it (see route).
func (r *reader) walkRoute(p string) routed {
	var rt routed
	w, err := r.walk(p, func(link string, _ fsread.Stamp) { rt.Links = append(rt.Links, link) })
	switch {
	case err == nil && w.end == walkDone:
		rt.Resolved = w.resolved
		s, ok := r.steps[w.resolved]
		rt.dir = !ok || s.err == nil && s.st.IsDir() // no step: the root
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
