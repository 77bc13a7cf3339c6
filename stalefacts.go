package runtimeguard

import "github.com/runtimeguard/runtimeguard/internal/updater"

// staleFacts is what a look at the updater's files for a stale answer
// found, before the rules that move with the clock and with processes
// are applied: the facts of every home's marker, why the homes are not
// all known, the install roots and their recovery markers.
type staleFacts struct {
	markers   []updater.MarkerFacts // the guard's own home first; one of path "" when no home is known
	problem   string                // why not every home was read, or ""
	links     []string              // the profiles directory's links that lead to no directory
	roots     []string
	locks     []string // the checkout locks of the roots
	present   []string
	rootsRead bool
}

// readStaleFacts reads the updater's files for the installs whose source
// directories are srcs: each home's marker and the artifacts beside it,
// and the recovery markers of every install root.
func (c *config) readStaleFacts(srcs []string) staleFacts {
	f := staleFacts{roots: c.installRoots(srcs...)}
	f.locks = c.checkoutLocks(f.roots)
	paths, links, problem := c.markerPathsAndLinks()
	f.problem, f.links = problem, links
	if len(paths) == 0 {
		paths = []string{""}
	}
	for _, p := range paths {
		f.markers = append(f.markers, c.env.upd.ReadMarker(p))
	}
	f.present, f.rootsRead = updater.RecoveryMarkers(f.roots, c.recovery)
	return f
}

// judgeMarkers classifies the markers of f now and returns the one that
// counts, with its path: the guard's own, unless another home's says
// more. It is the one classification of the updater's markers, of a
// read of the updater's files.
func (c *config) judgeMarkers(f *staleFacts) (updater.Verdict, string) {
	if c.noMarker {
		return updater.Verdict{State: updater.MarkerAbsent, Reason: "the updater's layout has no update marker"}, ""
	}
	best, bestPath := c.env.upd.JudgeMarker(&f.markers[0], c.maxAge), f.markers[0].Path
	for i := 1; i < len(f.markers) && best.State != updater.MarkerActive; i++ {
		if m := c.env.upd.JudgeMarker(&f.markers[i], c.maxAge); m.State.Rank() > best.State.Rank() {
			best, bestPath = m, f.markers[i].Path
		}
	}
	if f.problem != "" && best.State.Rank() < updater.MarkerUnknown.Rank() {
		// A home not read may hold an active marker.
		return updater.Verdict{State: updater.MarkerUnknown, Reason: f.problem}, bestPath
	}
	return best, bestPath
}

// staleObservation is the observation of a stale answer (no receipt read)
// that the facts f add up to now.
func (c *config) staleObservation(f *staleFacts) Observation {
	m, mpath := c.judgeMarkers(f)
	o := Observation{
		MarkerPath:      mpath,
		Marker:          MarkerState(m.State),
		MarkerReason:    m.Reason,
		InstallRoots:    nonNil(f.roots),
		RecoveryMarkers: nonNil(f.present),
		State:           combine(MarkerState(m.State), len(f.present) > 0, f.rootsRead),
		ReceiptPath:     c.receiptPath,
		LockPath:        c.lockPath,
	}
	probeCheckoutLocks(&o, f.locks)
	return o
}
