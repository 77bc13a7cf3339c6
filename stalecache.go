package runtimeguard

import (
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// staleFacts is what a look at the updater's files for a stale answer
// found, before the rules that move with the clock and with processes
// are applied: the facts of every home's marker, why the homes are not
// all known, the install roots and their recovery markers.
type staleFacts struct {
	markers   []markerFacts // the guard's own home first; one of path "" when no home is known
	problem   string        // why not every home was read, or ""
	links     []string      // the profiles directory's links that lead to no directory
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
		f.markers = append(f.markers, c.env.marker.readFacts(p))
	}
	f.present, f.rootsRead = updater.RecoveryMarkers(f.roots, c.recovery)
	return f
}

// judgeMarkers classifies the markers of f now and returns the one that
// counts, with its path: the guard's own, unless another home's says
// more. It is the one classification of the updater's markers, of a
// fresh read as of facts kept.
func (c *config) judgeMarkers(f *staleFacts) (marker, string) {
	if c.noMarker {
		return marker{MarkerAbsent, "the updater's layout has no update marker"}, ""
	}
	best, bestPath := c.env.marker.judge(&f.markers[0], c.maxAge), f.markers[0].Path
	for i := 1; i < len(f.markers) && best.State != MarkerActive; i++ {
		if m := c.env.marker.judge(&f.markers[i], c.maxAge); markerRank[m.State] > markerRank[best.State] {
			best, bestPath = m, f.markers[i].Path
		}
	}
	if f.problem != "" && markerRank[best.State] < markerRank[MarkerUnknown] {
		// A home not read may hold an active marker.
		return marker{State: MarkerUnknown, Reason: f.problem}, bestPath
	}
	return best, bestPath
}

// staleObservation is the observation of a stale answer (no receipt read)
// that the facts f add up to now.
func (c *config) staleObservation(f *staleFacts) Observation {
	m, mpath := c.judgeMarkers(f)
	o := Observation{
		MarkerPath:      mpath,
		Marker:          m.State,
		MarkerReason:    m.Reason,
		InstallRoots:    nonNil(f.roots),
		RecoveryMarkers: nonNil(f.present),
		State:           combine(m.State, len(f.present) > 0, f.rootsRead),
		ReceiptPath:     c.receiptPath,
		LockPath:        c.lockPath,
	}
	probeCheckoutLocks(&o, f.locks)
	return o
}

// staleCache keeps a binding's staleFacts while an inotify subscription
// of its own proves that none of the files they come from changed: the
// markers and every name beside them that starts like them (the
// artifacts of a claim or release), the profiles directory and every
// name in it, the recovery markers' names in each install root, and
// every directory above each. A stale answer from the cache costs one
// epoll_wait and the rules that are not files (the clock against the
// marker's time, the liveness of the processes the facts name, through
// the marker cache's process handle, and the probe of the checkout
// lock: an open and a try of a file in the checkout's Git directory, on
// the local file system the watch path requires), in the caller's
// goroutine: no stat, no other open, nothing that can block. Any event about those files, a
// change of the mount table, or another install directory (a full read
// of the checkout that resolved the module elsewhere) makes the next
// stale answer read them again, on the flight of the binding's updater
// reads (within ReadTimeout), and arm the subscription anew.
//
// A staleCache refers to no binding, so that the collector can close it
// once its binding is unreachable.
type staleCache struct {
	mu     sync.Mutex // protects sub and closed
	sub    *watch.Sub
	closed bool
	facts  atomic.Pointer[cachedFacts]
}

// cachedFacts are facts and what vouches for them: the claim of the read
// of the subscription begun before they were armed and read, and the module file the
// binding's latest full read resolved the configured path to, whose
// directory is an install directory they were read for.
type cachedFacts struct {
	staleFacts
	read   watch.Read
	module string
}

// cachedStale returns the stale answer's observation from the cache, when
// the cache proves the facts still hold for b.
func (b *binding) cachedStale(c *config) (Observation, bool) {
	sc := b.stale.Load()
	if sc == nil {
		return Observation{}, false
	}
	f := sc.facts.Load()
	if m := b.readModule.Load(); f == nil || m == nil || *m != f.module || !(f.read.Unchanged() || f.read.Recheck()) {
		return Observation{}, false
	}
	return c.staleObservation(&f.staleFacts), true
}

// observeStale reads the updater's files for b's stale answer, and keeps
// the facts in b's cache where a subscription can vouch for them. It runs
// on the flight of b's updater reads.
func (c *config) observeStale(b *binding) Observation {
	module := b.readModule.Load()
	srcs := b.installDirs()
	var read watch.Read
	var ok bool
	var armed, links []string
	sc := b.staleCacheFor(c)
	if sc != nil && module != nil {
		read, ok, armed, links = sc.arm(c, srcs)
	}
	f := c.readStaleFacts(srcs)
	if ok && slices.EqualFunc(f.markers, armed, func(m markerFacts, p string) bool { return m.Path == p }) && slices.Equal(f.links, links) {
		// The homes read are the homes watched, and the links that
		// may become homes too: one made between the two is read
		// again next time.
		sc.facts.Store(&cachedFacts{staleFacts: f, read: read, module: *module})
	}
	return c.staleObservation(&f)
}

// staleCacheFor returns b's cache, made on first use; nil where the
// updater's files cannot be watched (no watcher in this process,
// Options.NoWatch, Options.AlwaysRead) or b is no longer used.
func (b *binding) staleCacheFor(c *config) *staleCache {
	if sc := b.stale.Load(); sc != nil {
		return sc
	}
	if c.alwaysRead || b.unused() {
		return nil
	}
	if _, err := c.env.watch(); err != nil {
		return nil
	}
	sc := new(staleCache)
	if !b.stale.CompareAndSwap(nil, sc) {
		return b.stale.Load()
	}
	runtime.AddCleanup(b, func(sc *staleCache) { sc.close() }, sc)
	if b.unused() { // closed meanwhile
		sc.close()
	}
	return sc
}

// arm begins a read of the cache's subscription and watches the files
// the facts for srcs come from; it returns the read's claim, the marker
// paths watched and the profiles directory's links that lead to no
// directory, whose routes are watched (what one leads to can become a
// profile home with no change of the profiles directory), or false where
// they cannot be watched (a file system whose changes inotify may not
// report, the watch limit, a closed cache). The read begins before the
// files are watched and read: a change after it is either reported or
// read.
func (sc *staleCache) arm(c *config, srcs []string) (watch.Read, bool, []string, []string) {
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return watch.Read{}, false, nil, nil
	}
	if sc.sub == nil {
		w, err := c.env.watch()
		if err != nil {
			sc.mu.Unlock()
			return watch.Read{}, false, nil, nil
		}
		sc.sub = w.Subscribe()
	}
	sub := sc.sub
	sc.mu.Unlock()

	read := sub.Begin()
	paths, links, _ := c.markerPathsAndLinks()
	var entries []watch.Entry
	for _, p := range paths {
		entries = append(entries, watch.Entry{Path: p, File: true, Siblings: true})
	}
	for _, l := range links {
		entries = append(entries, watch.Entry{Path: filepath.Join(l, c.markerRel), File: true, Siblings: true})
	}
	if len(paths) == 0 {
		paths = []string{""}
	}
	if c.homes != nil && c.homes.profiles != "" {
		entries = append(entries, watch.Entry{Path: filepath.Join(c.homes.root, c.homes.profiles), Children: true})
	}
	for _, r := range c.installRoots(srcs...) {
		for _, name := range c.recovery {
			entries = append(entries, watch.Entry{Path: filepath.Join(r, name)})
		}
	}
	if err := sub.ArmPaths(entries, c.env.git); err != nil {
		return watch.Read{}, false, nil, nil
	}
	return read, true, paths, links
}

// close drops the cache's subscription for good.
func (sc *staleCache) close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.closed = true
	if sc.sub != nil {
		sc.sub.Close()
		sc.sub = nil
	}
	sc.facts.Store(nil)
}
