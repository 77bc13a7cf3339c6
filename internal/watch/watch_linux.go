package watch

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
)

// mask is what every watched directory reports: entries made, removed,
// renamed, written or with changed attributes, and the directory itself
// removed, renamed or unmounted.
const mask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_MASK_ADD

// moves are the events of a watched directory after which a name in it
// may lead elsewhere; selfMoves those after which a watch no longer
// watches what is at its path.
const (
	moves     = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
	selfMoves = unix.IN_IGNORED | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_UNMOUNT
)

// fileMask is what a watched file reports: writes and attribute changes
// through any of its names, and its removal.
const fileMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_MASK_ADD

// MaxWatchesPerSub bounds the directories one subscription may watch: a
// path nested deeper than this keeps the stat path.
const MaxWatchesPerSub = 256

// Local file systems, whose every change is made through this kernel and
// reported by inotify (statfs f_type, linux/magic.h).
var localTypes = map[int64]string{
	0xEF53:     "ext4",
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x01021994: "tmpfs",
	0xF2F52010: "f2fs",
	0x858458F6: "ramfs",
	0x2FC12FC1: "zfs",
	0x3153464A: "jfs",
	0x52654973: "reiserfs",
	0x4D44:     "vfat",
	0x5346544E: "ntfs",
	0x2011BAB0: "exfat",
	0x9FA0:     "proc",
}

// Watcher is the process's inotify descriptor and what it watches. Make
// it with Shared; it is never closed.
type Watcher struct {
	fd    int     // the inotify descriptor, non-blocking
	slots []*slot // the epoll sets checks poll through, one check at a time each
	// spare is one more, for the checks that found every slot busy: they
	// take it in turn, under spareMu.
	spare   *slot
	spareMu sync.Mutex

	// seq is odd while events are drained and dispatched: a check that
	// polled nothing is only sure no event was consumed meanwhile if seq
	// was even and unchanged around its poll.
	seq atomic.Uint64

	// mountChanges counts the changes of the mount table seen, each of
	// which made every subscription read again.
	mountChanges atomic.Uint64

	mu   sync.Mutex // protects byWD, subs, pins, armers, removals, removedAt, the removing of watches, and the draining
	byWD map[int32]*dir
	subs map[*Sub]struct{}
	buf  []byte

	// Watches are added with no lock held (a path lookup may hang), and
	// inotify_add_watch hands out the same descriptor for an inode already
	// watched, which another subscription may remove before this one
	// registers it. So an arming subscription pins each descriptor it was
	// handed (a pinned watch is not removed; the last unpin removes it if
	// no subscription registered it), and one removed between its adding
	// and its pinning is added again: removals counts every removal, and
	// removedAt says when each descriptor was removed while any
	// subscription armed.
	pins      map[int32]int
	armers    int
	removals  uint64
	removedAt map[int32]uint64

	// An event drained while a subscription arms reaches only those that
	// registered its watch, and an arming one has not yet: while any
	// subscription arms, touched records which names of which watches
	// events touched (name "" for the watch itself, and every event of a
	// file's), as the count of events then; once it grew too large to
	// hold, touchedAll is the count at the latest event instead.
	events       uint64
	touched      map[int32]map[string]uint64
	touchedNames int
	touchedAll   uint64

	// beforeRegister, for tests, runs in each arm after its watches were
	// added and before they are registered.
	beforeRegister func()
}

// slot is an epoll set holding the inotify descriptor and a descriptor of
// /proc/self/mountinfo of its own: polling the mount table consumes its
// change, per open file, so each slot is polled by one check at a time,
// and a check that consumes a mount change marks every subscription dirty
// before it gives the slot back.
type slot struct {
	busy   atomic.Int32
	ep     int
	mounts int
	events [2]unix.EpollEvent
}

// dir is one watched directory (one inode: the path it was last watched
// at is for messages) and the entries in it that matter, each with the
// subscriptions that depend on it.
type dir struct {
	path  string
	wd    int32
	names map[string]map[*Sub]int
	subs  map[*Sub]int // every subscription with an entry here
}

var (
	shared    *Watcher
	sharedErr error
	once      sync.Once
)

// Shared returns the process's watcher, made on first use. Watch limits
// are per user (max_user_instances is often 128): a process uses one
// descriptor, whatever its number of guards.
func Shared() (*Watcher, error) {
	once.Do(func() { shared, sharedErr = newWatcher() })
	return shared, sharedErr
}

func newWatcher() (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	w := &Watcher{fd: fd, byWD: map[int32]*dir{}, subs: map[*Sub]struct{}{}, buf: make([]byte, 64<<10), pins: map[int32]int{}, removedAt: map[int32]uint64{}, touched: map[int32]map[string]uint64{}}
	n := min(max(2*runtime.GOMAXPROCS(0), 4), 64)
	for i := 0; i < n; i++ {
		s, err := newSlot(fd)
		if err != nil {
			w.close()
			return nil, err
		}
		w.slots = append(w.slots, s)
	}
	if w.spare, err = newSlot(fd); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func newSlot(inotify int) (*slot, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	s := &slot{ep: ep, mounts: -1}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, inotify, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(inotify)}); err != nil {
		unix.Close(ep)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	s.mounts, err = unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(ep)
		return nil, fmt.Errorf("mount table: %w", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, s.mounts, &unix.EpollEvent{Events: unix.EPOLLPRI, Fd: int32(s.mounts)}); err != nil {
		unix.Close(s.mounts)
		unix.Close(ep)
		return nil, fmt.Errorf("epoll_ctl of the mount table: %w", err)
	}
	return s, nil
}

func (w *Watcher) close() {
	for _, s := range append(w.slots, w.spare) {
		if s == nil {
			continue
		}
		unix.Close(s.mounts)
		unix.Close(s.ep)
	}
	unix.Close(w.fd)
}

// Sub is one guard binding's subscription: the entries its answer depends
// on. It is dirty, set by whichever check drains the events, once an event
// touches one of them; Begin starts a new read.
type Sub struct {
	w     *Watcher
	gen   atomic.Uint64 // bumped by Begin: a read began
	dirty atomic.Bool

	// w.mu protects the rest.
	regs   []reg           // what Arm registered
	has    map[reg]bool    // the same, as a set
	dirs   map[string]*dir // the directories watched, by path (links resolved)
	files  map[string]*dir // the files watched, by path (links resolved)
	closed bool
	// moved are the registrations whose name was made, removed or
	// renamed since the last arm looked, and the watches removed or moved
	// (name ""): what a path through one leads to may have changed, and
	// the next arm watches it anew. With movedAll, every one (the mount
	// table changed, the queue overflowed).
	moved    map[reg]bool
	movedAll bool

	statfs, adds, rms atomic.Uint64 // the system calls of its arming: see Calls
}

// Calls counts system calls a subscription's arming made.
type Calls struct {
	Statfs, AddWatch, RmWatch uint64
}

// Calls returns the system calls the subscription's arming made so far.
func (s *Sub) Calls() Calls {
	return Calls{Statfs: s.statfs.Load(), AddWatch: s.adds.Load(), RmWatch: s.rms.Load()}
}

// reg is one entry a subscription registered: the directory and the name
// in it ("" for the directory itself).
type reg struct {
	d    *dir
	name string
}

// Subscribe returns a subscription with nothing registered yet: dirty until
// armed.
func (w *Watcher) Subscribe() *Sub {
	s := &Sub{w: w}
	s.dirty.Store(true)
	w.mu.Lock()
	w.subs[s] = struct{}{}
	w.mu.Unlock()
	return s
}

// Read is one read's claim on a subscription, from the moment it began
// (Begin): it vouches for what the read found while no change of what the
// subscription watches has been seen since, and no later read began.
type Read struct {
	s   *Sub
	gen uint64
}

// Begin starts a read: the events queued so far are drained, the
// subscription is clean, and every change from now on makes it dirty.
// What an earlier read's claim proved no longer counts.
func (s *Sub) Begin() Read { return Read{s, s.begin()} }

// Sub is the subscription the read claims.
func (r Read) Sub() *Sub { return r.s }

// Unchanged reports, in one system call, that no event touched the
// subscription's entries since the read began: nothing queued on the
// inotify descriptor, no change of the mount table, no event drained by
// another check that made it dirty, and no other read begun. False means
// the caller must look closer (Recheck), not that anything changed.
func (r Read) Unchanged() bool { return r.s.unchanged(r.gen) }

// Recheck drains the queued events and reports whether the subscription
// is still clean for the read: an event that touched nothing it depends
// on costs no read. A check whose Unchanged said false calls it before
// reading again.
func (r Read) Recheck() bool { return r.s.recheck(r.gen) }

// Overtaken reports whether another read began since this one: a check
// of this read that failed may then be answered by that one.
func (r Read) Overtaken() bool { return r.s.gen.Load() != r.gen }

// Dirty reports whether an event touched what the subscription depends on
// since the latest read began.
func (r Read) Dirty() bool { return r.s.dirty.Load() }

// unchanged is Read.Unchanged of the read of generation gen.
func (s *Sub) unchanged(gen uint64) bool {
	w := s.w
	seq := w.seq.Load()
	if seq&1 != 0 || s.dirty.Load() || s.gen.Load() != gen {
		return false
	}
	sl := w.acquire()
	if sl == nil {
		return false // no slot freed within slotWait: look closer
	}
	n, err := epollWait(sl.ep, sl.events[:], 0)
	if err != nil || n != 0 {
		w.consume(sl, n)
		w.release(sl)
		return false
	}
	w.release(sl)
	return !s.dirty.Load() && w.seq.Load() == seq && s.gen.Load() == gen
}

// acquire takes a free slot. While every slot is busy (more goroutines
// check at once than there are slots, or the thread of a holder was
// preempted around its poll), it yields to the goroutines that hold them a
// few times, then queues for the spare slot, whose mutex hands it to its
// waiters in turn once they have waited a millisecond: no check falls to a
// full read for want of a slot, and none is starved. A slot is held for
// one non-blocking epoll_wait and, when that reported something, the
// draining of the queue under w.mu (never held across a call that may
// block), so the wait is bounded by the checks ahead of it.
func (w *Watcher) acquire() *slot {
	if sl := w.tryAcquire(); sl != nil {
		return sl
	}
	for i := 0; i < acquireYields; i++ {
		runtime.Gosched()
		if sl := w.tryAcquire(); sl != nil {
			return sl
		}
	}
	w.spareMu.Lock()
	return w.spare
}

// acquireYields is how many times a check that found every slot busy
// yields before it queues for the spare slot.
const acquireYields = 4

// tryAcquire takes a free slot, or returns nil when every one is busy.
func (w *Watcher) tryAcquire() *slot {
	n := len(w.slots)
	i := int(rand.Uint32N(uint32(n)))
	for k := 0; k < n; k++ {
		sl := w.slots[(i+k)%n]
		if sl.busy.CompareAndSwap(0, 1) {
			return sl
		}
	}
	return nil
}

func (w *Watcher) release(sl *slot) {
	if sl == w.spare {
		w.spareMu.Unlock()
		return
	}
	sl.busy.Store(0)
}

// consume handles what a slot's poll reported: a change of the mount
// table (which the poll consumed, for this slot) makes every subscription
// dirty before the slot is given back; queued inotify events are drained.
func (w *Watcher) consume(sl *slot, n int) {
	mounts := false
	for i := 0; i < n; i++ {
		if sl.events[i].Fd == int32(sl.mounts) {
			mounts = true
		}
	}
	w.apply(mounts)
}

// apply drains the queued inotify events, and makes every subscription
// dirty first when the mount table changed, inside one odd sequence
// number so that a lock-free reader sees either all of it or none.
func (w *Watcher) apply(mounts bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq.Add(1)
	if mounts {
		w.mountChanges.Add(1)
		w.dirtyAll()
	}
	w.drain()
	w.seq.Add(1)
}

// recheck is Read.Recheck of the read of generation gen.
func (s *Sub) recheck(gen uint64) bool {
	w := s.w
	sl := w.acquire()
	n, err := epollWait(sl.ep, sl.events[:], 0)
	if err == nil && n > 0 {
		w.consume(sl, n)
	}
	w.release(sl)
	w.apply(false)
	return !s.dirty.Load() && s.gen.Load() == gen
}

// begin starts a read (see Begin) and returns its generation.
func (s *Sub) begin() uint64 {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq.Add(1)
	w.drain()
	gen := s.gen.Add(1)
	s.dirty.Store(false)
	w.seq.Add(1)
	return gen
}

// drain reads every queued event and marks the subscriptions they touch;
// w.mu is held.
func (w *Watcher) drain() {
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err != nil || n <= 0 {
			return // EAGAIN: the queue is empty
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&w.buf[off]))
			nameLen := int(ev.Len)
			name := ""
			if nameLen > 0 {
				raw := w.buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
				if i := strings.IndexByte(string(raw), 0); i >= 0 {
					raw = raw[:i]
				}
				name = string(raw)
			}
			off += unix.SizeofInotifyEvent + nameLen
			w.dispatch(ev.Wd, ev.Mask, name)
		}
	}
}

// dispatch marks the subscriptions one event touches; w.mu is held.
func (w *Watcher) dispatch(wd int32, m uint32, name string) {
	if w.armers > 0 {
		w.touch(wd, name)
	}
	if m&unix.IN_Q_OVERFLOW != 0 {
		w.dirtyAll()
		return
	}
	if m&unix.IN_IGNORED != 0 {
		w.removed(wd) // also a watch an arming subscription has not registered yet
	}
	d := w.byWD[wd]
	if d == nil {
		return
	}
	if m&selfMoves != 0 || name == "" {
		for s := range d.subs {
			s.markDirty()
			if m&selfMoves != 0 {
				s.markMoved(reg{d, ""})
			}
		}
		if m&unix.IN_IGNORED != 0 { // the watch is gone: forget it
			delete(w.byWD, wd)
			d.wd = -1
		}
		return
	}
	for s := range d.names[name] {
		s.markDirty()
		if m&moves != 0 {
			s.markMoved(reg{d, name})
		}
	}
}

// maxTouched bounds the names touched holds, across its watches.
const maxTouched = 4096

// touch records an event of name in the watch wd while a subscription
// arms; w.mu is held.
func (w *Watcher) touch(wd int32, name string) {
	w.events++
	if w.touchedAll > 0 {
		w.touchedAll = w.events
		return
	}
	names := w.touched[wd]
	if _, ok := names[name]; !ok {
		if w.touchedNames >= maxTouched {
			w.touchedAll = w.events
			return
		}
		w.touchedNames++
		if names == nil {
			names = map[string]uint64{}
			w.touched[wd] = names
		}
	}
	names[name] = w.events
}

// touchedSince reports whether an event drained after the count since
// touched, in a name the arm needs (want, by path) or in itself, a
// directory's watch it added (dirWDs) or kept (keptDirs: a name it needs
// there may be new to it), or a file's watch it added (fileWDs, whose
// events all have the name ""); w.mu is held.
func (w *Watcher) touchedSince(since uint64, want map[string]map[string]bool, dirWDs map[string]int32, keptDirs map[string]*dir, fileWDs map[string]int32) bool {
	if w.touchedAll > since {
		return true
	}
	dirTouched := func(path string, wd int32) bool {
		names := w.touched[wd]
		if names[""] > since {
			return true
		}
		for name := range want[path] {
			if names[name] > since {
				return true
			}
		}
		return false
	}
	for path, wd := range dirWDs {
		if dirTouched(path, wd) {
			return true
		}
	}
	for path, d := range keptDirs {
		if dirTouched(path, d.wd) {
			return true
		}
	}
	for _, wd := range fileWDs {
		if w.touched[wd][""] > since {
			return true
		}
	}
	return false
}

// dirtyAll makes every subscription dirty, and distrusts every watch: an
// overflow lost events, and a mount moves paths without one; w.mu is held.
func (w *Watcher) dirtyAll() {
	for s := range w.subs {
		s.markDirty()
		s.movedAll = true
	}
}

// markMoved records that what r leads to may have changed; w.mu is held.
func (s *Sub) markMoved(r reg) {
	if s.moved == nil {
		s.moved = map[reg]bool{}
	}
	s.moved[r] = true
}

func (s *Sub) markDirty() { s.dirty.Store(true) }

// entry is one path an answer depends on, as the reader reached it: a
// change of what is at Path (links resolved), of any directory above it,
// or of any link on its route makes the answer stale. dir, for a
// directory, adds its .git, HEAD, objects and refs entries: a .git made in
// it moves the worktree, and the other three can make it a bare
// repository. file, for a file, watches the file itself: a write through
// another of its names.
type entry struct {
	gitread.Route
	dir, file bool
}

// Arm registers what a read's answer depends on: each file it read, with
// its route (gitread.Routed), replacing what the subscription registered
// before; readStart is when the read began, and fsys what it read through.
//
// Every directory from the root down to each file is watched, for the
// name of the next component below it, along the route the kernel takes
// (each link on the way, and where it leads); a file is watched itself
// too, so that a write through another name of it (a hard link, a bind
// mount) is seen. A directory that does not exist is not watched: the
// nearest one above it that does reports its creation. A watch whose path
// this subscription watched before, on a route that no event moved since
// (no name on the way made, removed or renamed, no watch removed, no
// mount or overflow), still watches what is there and is kept; every
// other is added anew by its path.
//
// Where Arm registers a name the subscription did not before, a change
// between the read and now went unreported: the files must be settled
// (their timestamps old enough to tell a later change) and unchanged, and
// reached by the routes the read took, else the subscription is dirty,
// and the next arm watches those names anew. So also where an event,
// read by another check before this call registered its watches,
// touched a name it needs in a directory it watches (one it added, or one
// it kept, where the name may be new to it): a change made and undone in
// that time leaves the files as the read found them, but a watch added
// meanwhile may be on what was there then.
//
// An error (a file system whose changes may not be reported, the watch
// limit) means the subscription cannot be trusted: the caller keeps the
// stat path, and the error says why; the watches this call added that no
// subscription registered are removed again.
//
// No lock is held while paths are looked up (statfs and
// inotify_add_watch): a file system that hangs holds up this call only,
// never the checks of other subscriptions.
func (s *Sub) Arm(deps gitread.Deps, routes []gitread.Route, fsys *gitread.FS, readStart time.Time) error {
	if len(routes) != len(deps) {
		return fmt.Errorf("%d routes for %d files", len(routes), len(deps))
	}
	entries := make([]entry, len(deps))
	for i, d := range deps {
		entries[i] = entry{
			Route: routes[i],
			dir:   d.NoFollow && d.Stamp.IsDir(),
			file:  d.Stamp.Present() && !d.Stamp.IsDir() && !(d.NoFollow && d.Stamp.IsLink()),
		}
	}
	fresh, raced, err := s.arm(entries)
	if err != nil {
		return err
	}
	if raced || len(fresh) > 0 && !(deps.Settled(readStart) && deps.Unchanged(fsys) && routesHold(deps, routes, fsys)) {
		s.distrust(fresh)
	}
	return nil
}

// routesHold reports whether the kernel's routes to deps are still the
// read's: a link swapped in on the way since, even to the very file the
// read found (which no stamp tells), moves what must be watched.
func routesHold(deps gitread.Deps, routes []gitread.Route, fsys *gitread.FS) bool {
	paths := make([]string, len(deps))
	for i := range deps {
		paths[i] = deps[i].Path
	}
	for i, now := range gitread.Routes(fsys, paths) {
		if now.Resolved != routes[i].Resolved || !slices.Equal(now.Links, routes[i].Links) {
			return false
		}
	}
	return true
}

// distrust makes the subscription dirty and the next arm watch anew what
// the names fresh registered lead to: a move of one between the read and
// its registration went unreported. (A watch of its own is not in doubt:
// a move of what it watches is one of a name in the directory above.)
func (s *Sub) distrust(fresh []reg) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	s.markDirty()
	for _, r := range fresh {
		if r.name != "" {
			s.markMoved(r)
		}
	}
}

// arm registers entries (see Arm) and returns the registrations the
// subscription did not have before, and whether an event that reached
// none of them touched what it needs in a watch it added or kept before
// it registered them (see touchedSince).
func (s *Sub) arm(entries []entry) (fresh []reg, raced bool, err error) {
	want, files, err := plan(entries)
	if err != nil {
		return nil, false, err
	}
	w := s.w
	w.mu.Lock()
	w.armers++
	// Every move queued until now counts in what is kept.
	w.seq.Add(1)
	w.drain()
	w.seq.Add(1)
	since := w.events
	keptDirs, keptFiles := s.unmoved(want, files)
	s.moved, s.movedAll = nil, false
	w.mu.Unlock()
	dirWDs, fileWDs, added, missing, err := w.addWatches(s, want, files, keptDirs, keptFiles)
	if w.beforeRegister != nil {
		w.beforeRegister()
	}
	w.mu.Lock()
	if err == nil {
		fresh, err = s.register(want, dirWDs, fileWDs, keptDirs, keptFiles)
		raced = err == nil && w.touchedSince(since, want, dirWDs, keptDirs, fileWDs)
	}
	w.unpin(s, added) // and, on failure, remove what no one registered
	w.armers--
	if w.armers == 0 {
		clear(w.removedAt)
		clear(w.touched)
		w.touchedNames, w.touchedAll = 0, 0
	}
	w.mu.Unlock()
	if err == nil && len(missing) > 0 && anyExists(missing) {
		// A directory made between its lookup and its parent's
		// registration went unreported: read again.
		s.markDirty()
	}
	return fresh, raced, err
}

// unmoved returns the watches of want's directories and of files that the
// subscription has at the same path, reached through names no event moved
// since the last arm: they watch what is there now; w.mu is held.
func (s *Sub) unmoved(want map[string]map[string]bool, files []string) (dirs, fileDirs map[string]*dir) {
	if s.movedAll || len(s.regs) == 0 {
		return nil, nil
	}
	routeKept := map[string]bool{"/": true}
	// kept reports whether the names from the root down to p are all
	// registered and unmoved.
	var kept func(p string) bool
	kept = func(p string) bool {
		if k, ok := routeKept[p]; ok {
			return k
		}
		parent := filepath.Dir(p)
		d, name := s.dirs[parent], filepath.Base(p)
		k := kept(parent) && d != nil && d.wd >= 0 && !s.moved[reg{d, ""}] && s.has[reg{d, name}] && !s.moved[reg{d, name}]
		routeKept[p] = k
		return k
	}
	live := func(d *dir) bool { return d != nil && d.wd >= 0 && !s.moved[reg{d, ""}] }
	for p := range want {
		if d := s.dirs[p]; live(d) && kept(p) {
			if dirs == nil {
				dirs = map[string]*dir{}
			}
			dirs[p] = d
		}
	}
	for _, p := range files {
		if d := s.files[p]; live(d) && kept(p) {
			if fileDirs == nil {
				fileDirs = map[string]*dir{}
			}
			fileDirs[p] = d
		}
	}
	return dirs, fileDirs
}

// maxAddAttempts bounds the times a watch is added again because another
// subscription removed it before it was pinned.
const maxAddAttempts = 8

// errContended is the error of an arm that gave up after maxAddAttempts:
// the check that armed reads again next time, as after any failed arm.
var errContended = errors.New("removed by other subscriptions while it was added")

// removed records that the watch wd is gone; w.mu is held.
func (w *Watcher) removed(wd int32) {
	w.removals++
	if w.armers > 0 {
		w.removedAt[wd] = w.removals
	}
}

// addPinned watches path and pins the watch: it stays until unpin, even
// if every subscription that registered it closes meanwhile; w.mu is not
// held.
func (w *Watcher) addPinned(s *Sub, path string, m uint32) (int32, error) {
	for attempt := 0; ; attempt++ {
		w.mu.Lock()
		since := w.removals
		w.mu.Unlock()
		wd, err := w.addWatch(s, path, m)
		if err != nil {
			return -1, err
		}
		w.mu.Lock()
		if w.removedAt[wd] <= since {
			w.pins[wd]++
			w.mu.Unlock()
			return wd, nil
		}
		w.mu.Unlock()
		if attempt+1 >= maxAddAttempts {
			return -1, fmt.Errorf("the watch of %s: %w, %d times", path, errContended, maxAddAttempts)
		}
	}
}

// unpin releases the pins of wds, which s's arming took, removing each
// watch that is then neither pinned nor registered; w.mu is held.
func (w *Watcher) unpin(s *Sub, wds []int32) {
	for _, wd := range wds {
		if w.pins[wd]--; w.pins[wd] > 0 {
			continue
		}
		delete(w.pins, wd)
		d := w.byWD[wd]
		if d != nil && len(d.subs) > 0 {
			continue
		}
		if d != nil {
			delete(w.byWD, wd)
			d.wd = -1
		}
		s.rms.Add(1)
		unix.InotifyRmWatch(w.fd, uint32(wd))
		w.removed(wd)
	}
}

// anyExists reports whether something is at one of paths.
func anyExists(paths []string) bool {
	for _, p := range paths {
		var st unix.Stat_t
		if err := fsread.IgnoringEINTR(func() error { return unix.Lstat(p, &st) }); err == nil {
			return true
		}
	}
	return false
}

// discoveryNames are the entries that make a directory on the way to the
// module a worktree's top level (.git) or, to git, a bare repository.
var discoveryNames = [...]string{".git", "HEAD", "objects", "refs"}

// plan lists the directories to watch, each with the names in it that
// matter, and the files to watch themselves, from each entry's route:
// every path is one the kernel walks, links resolved.
func plan(entries []entry) (map[string]map[string]bool, []string, error) {
	want := map[string]map[string]bool{}
	add := func(dirPath, name string) {
		if want[dirPath] == nil {
			want[dirPath] = map[string]bool{}
		}
		want[dirPath][name] = true
	}
	chain := func(p string) {
		for p != "/" {
			parent := filepath.Dir(p)
			add(parent, filepath.Base(p))
			p = parent
		}
	}
	var files []string
	for _, e := range entries {
		p := filepath.Clean(e.Resolved)
		if !filepath.IsAbs(p) {
			return nil, nil, fmt.Errorf("%s is not absolute", p)
		}
		chain(p)
		for _, l := range e.Links {
			chain(filepath.Clean(l))
		}
		if e.dir {
			for _, name := range discoveryNames {
				add(p, name)
			}
		}
		if e.file && !slices.Contains(files, p) {
			files = append(files, p)
		}
	}
	if len(want)+len(files) > MaxWatchesPerSub {
		return nil, nil, fmt.Errorf("%d watches needed, over the limit of %d", len(want)+len(files), MaxWatchesPerSub)
	}
	return want, files, nil
}

// addWatches adds an inotify watch on each directory and file that is not
// kept, on local file systems only, directories from the root down, for
// the subscription s; w.mu is not held. A file or directory that is not
// there is not watched (missing lists such directories): the entry of its
// directory, watched before it was looked up, reports its creation. added
// lists every watch descriptor it was handed and pinned, also on failure.
func (w *Watcher) addWatches(s *Sub, dirs map[string]map[string]bool, files []string, keptDirs, keptFiles map[string]*dir) (dirWDs, fileWDs map[string]int32, added []int32, missing []string, err error) {
	paths := make([]string, 0, len(dirs))
	for path := range dirs {
		paths = append(paths, path)
	}
	slices.SortFunc(paths, func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(a, "/"), strings.Count(b, "/")), strings.Compare(a, b))
	})
	dirWDs = make(map[string]int32, len(dirs))
	fileWDs = make(map[string]int32, len(files))
	for _, path := range paths {
		if keptDirs[path] != nil {
			continue
		}
		wd, err := w.addPinned(s, path, mask)
		if isAbsent(err) {
			missing = append(missing, path)
			continue
		}
		if err != nil {
			return nil, nil, added, nil, err
		}
		added = append(added, wd)
		dirWDs[path] = wd
	}
	for _, path := range files {
		if keptFiles[path] != nil {
			continue
		}
		wd, err := w.addPinned(s, path, fileMask)
		if isAbsent(err) {
			continue
		}
		if err != nil {
			return nil, nil, added, nil, err
		}
		added = append(added, wd)
		fileWDs[path] = wd
	}
	return dirWDs, fileWDs, added, missing, nil
}

// isAbsent reports an error of a path at which nothing is.
func isAbsent(err error) bool { return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) }

// addWatch checks that path is on a local file system and watches it,
// for the subscription s.
func (w *Watcher) addWatch(s *Sub, path string, m uint32) (int32, error) {
	s.statfs.Add(1)
	var st unix.Statfs_t
	if err := fsread.IgnoringEINTR(func() error { return unix.Statfs(path, &st) }); err != nil {
		return -1, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	if _, ok := localTypes[int64(st.Type)]; !ok {
		return -1, fmt.Errorf("%s is on a file system (type %#x) whose changes inotify may not report", path, st.Type)
	}
	s.adds.Add(1)
	wd, err := unix.InotifyAddWatch(w.fd, path, m)
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return -1, fmt.Errorf("inotify watch limit reached (fs.inotify.max_user_watches) watching %s", path)
		}
		return -1, &os.PathError{Op: "inotify_add_watch", Path: path, Err: err}
	}
	return int32(wd), nil
}

// register records what the subscription depends on, on the watches just
// added and those kept, drops what it registered before, and returns the
// registrations it did not have; w.mu is held.
func (s *Sub) register(want map[string]map[string]bool, dirWDs, fileWDs map[string]int32, keptDirs, keptFiles map[string]*dir) (fresh []reg, err error) {
	w := s.w
	if s.closed {
		return nil, errors.New("the watch subscription was closed")
	}
	old, had := s.regs, s.has
	s.regs, s.has = nil, make(map[reg]bool, len(old))
	s.dirs, s.files = make(map[string]*dir, len(want)), make(map[string]*dir, len(fileWDs)+len(keptFiles))
	keep := func(d *dir, name string) {
		r := reg{d, name}
		if !had[r] && !s.has[r] {
			// An entry this subscription did not have: events about
			// it before now reached no one here.
			fresh = append(fresh, r)
		}
		if d.names[name] == nil {
			d.names[name] = map[*Sub]int{}
		}
		d.names[name][s]++
		d.subs[s]++
		s.regs = append(s.regs, r)
		s.has[r] = true
	}
	for path, names := range want {
		d := keptDirs[path]
		if d == nil {
			wd, ok := dirWDs[path]
			if !ok {
				continue // not there: its parent reports its creation
			}
			d = w.record(wd, path)
		}
		s.dirs[path] = d
		for name := range names {
			keep(d, name)
		}
	}
	for path, d := range keptFiles {
		s.files[path] = d
		keep(d, "")
	}
	for path, wd := range fileWDs {
		d := w.record(wd, "")
		s.files[path] = d
		keep(d, "")
	}
	// Drop the old registrations only now: a watch both need is kept, and
	// is not fresh.
	kept := s.regs
	s.regs = old
	s.unregister()
	s.regs = kept
	return fresh, nil
}

// record returns the record of a watch, made if new; w.mu is held.
func (w *Watcher) record(wd int32, path string) *dir {
	if d := w.byWD[wd]; d != nil {
		if path != "" {
			d.path = path
		}
		return d
	}
	d := &dir{path: path, wd: wd, names: map[string]map[*Sub]int{}, subs: map[*Sub]int{}}
	w.byWD[wd] = d
	return d
}

// unregister drops what the subscription registered, and the watches no
// subscription needs any more; w.mu is held.
func (s *Sub) unregister() {
	w := s.w
	for _, r := range s.regs {
		d := r.d
		if m := d.names[r.name]; m != nil {
			if m[s]--; m[s] <= 0 {
				delete(m, s)
			}
			if len(m) == 0 {
				delete(d.names, r.name)
			}
		}
		if d.subs[s]--; d.subs[s] <= 0 {
			delete(d.subs, s)
		}
		if len(d.subs) == 0 && d.wd >= 0 && w.pins[d.wd] == 0 {
			s.rms.Add(1)
			unix.InotifyRmWatch(w.fd, uint32(d.wd))
			delete(w.byWD, d.wd)
			w.removed(d.wd)
			d.wd = -1
		}
	}
	s.regs = s.regs[:0]
}

// Close drops the subscription: it is dirty for good.
func (s *Sub) Close() {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	s.dirty.Store(true)
	s.closed = true
	s.unregister()
	s.has, s.dirs, s.files, s.moved = nil, nil, nil, nil
	delete(w.subs, s)
}

// Registered lists the watch descriptors the subscription registered.
func (s *Sub) Registered() []int32 {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	var wds []int32
	for _, r := range s.regs {
		if r.d.wd >= 0 && !slices.Contains(wds, r.d.wd) {
			wds = append(wds, r.d.wd)
		}
	}
	return wds
}

// Leaked reports whether the kernel still holds the watch wd although no
// subscription registered it and no arm pinned it: a watch nothing would
// ever remove.
func (w *Watcher) Leaked(wd int32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := w.byWD[wd]; d != nil && len(d.subs) > 0 || w.pins[wd] > 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", w.fd))
	if err != nil {
		return false
	}
	return strings.Contains(string(b), fmt.Sprintf("inotify wd:%x ", wd))
}

// Waiter blocks until an event is queued: the event source of a guard's
// background watch, with no polling.
type Waiter struct {
	w      *Watcher
	sl     *slot
	cancel int // an eventfd written to end a Wait
}

// NewWaiter returns a waiter with an epoll set of its own.
func (w *Watcher) NewWaiter() (*Waiter, error) {
	sl, err := newSlot(w.fd)
	if err != nil {
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(sl.mounts)
		unix.Close(sl.ep)
		return nil, err
	}
	if err := unix.EpollCtl(sl.ep, unix.EPOLL_CTL_ADD, efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}); err != nil {
		unix.Close(efd)
		unix.Close(sl.mounts)
		unix.Close(sl.ep)
		return nil, err
	}
	return &Waiter{w: w, sl: sl, cancel: efd}, nil
}

// Wait blocks until an inotify event is queued or the mount table changed
// (and handles them: subscriptions they touch turn dirty), or Stop was
// called; it reports false for Stop.
func (wt *Waiter) Wait() bool {
	var events [3]unix.EpollEvent
	n, err := epollWait(wt.sl.ep, events[:], -1)
	if err != nil {
		return false
	}
	mounts := false
	for i := 0; i < n; i++ {
		switch events[i].Fd {
		case int32(wt.cancel):
			return false
		case int32(wt.sl.mounts):
			mounts = true
		}
	}
	wt.w.apply(mounts)
	return true
}

// Stop ends the Wait in progress and every later one.
func (wt *Waiter) Stop() {
	var one = [8]byte{1}
	_, _ = unix.Write(wt.cancel, one[:])
}

// Close releases the waiter's descriptors; no Wait may be in progress.
func (wt *Waiter) Close() {
	unix.Close(wt.cancel)
	unix.Close(wt.sl.mounts)
	unix.Close(wt.sl.ep)
}

// epollWait is unix.EpollWait retried on EINTR.
func epollWait(ep int, events []unix.EpollEvent, msec int) (int, error) {
	for {
		n, err := unix.EpollWait(ep, events, msec)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// MountChanges is how many changes of the mount table the watcher has seen:
// each makes every subscription read again, whatever was mounted where.
func (w *Watcher) MountChanges() uint64 { return w.mountChanges.Load() }
