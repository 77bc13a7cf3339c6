package watch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/fusehang"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// liveWDs lists the watch descriptors the kernel holds on the inotify fd.
func liveWDs(t *testing.T, fd int) map[int32]bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	require.NoError(t, err)
	m := map[int32]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "inotify" {
			v, err := strconv.ParseInt(strings.TrimPrefix(f[1], "wd:"), 16, 32)
			require.NoError(t, err)
			m[int32(v)] = true
		}
	}
	return m
}

// A subscription armed while others on the same directory arm and close
// counts only on watches the kernel still has, and a write after it armed
// makes it dirty: a watch another subscription removed in between is never
// one it registers. (Before arming took the lock removals take, 1 in 40
// rounds registered a dead watch and missed the write.)
func TestArmWhileOthersClose(t *testing.T) {
	w, err := Shared()
	if err != nil {
		t.Skipf("no watch path here: %v", err)
	}
	root := t.TempDir()
	file := filepath.Join(root, "x", "f")
	require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
	require.NoError(t, os.WriteFile(file, []byte("a"), 0o644))
	probe := w.Subscribe()
	_, _, err = probe.arm([]entry{fileEntry(file)})
	probe.Close() // a subscription left open would keep the watches alive
	if err != nil {
		t.Skipf("no watch path for %s: %v", root, err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	churn := func(path string) {
		defer wg.Done()
		for !stop.Load() {
			s := w.Subscribe()
			s.begin()
			_, _, _ = s.arm([]entry{fileEntry(path)})
			s.Close()
		}
	}
	for i := 0; i < 2; i++ {
		other := filepath.Join(root, fmt.Sprint("n", i), "f")
		require.NoError(t, os.MkdirAll(filepath.Dir(other), 0o755))
		require.NoError(t, os.WriteFile(other, nil, 0o644))
		wg.Add(2)
		go churn(file)
		go churn(other)
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()

	rounds, contended := 0, 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); rounds++ {
		s := w.Subscribe()
		gen := s.begin()
		_, _, err := s.arm([]entry{fileEntry(file)})
		if errors.Is(err, errContended) {
			// The bounded give-up of a loaded machine: nothing is
			// registered, and the caller reads again next time.
			assert.Empty(t, s.regs, "round %d: an arm that gave up keeps no watch", rounds)
			s.Close()
			contended++
			continue
		}
		require.NoError(t, err)
		w.mu.Lock()
		var wds []int32
		for _, r := range s.regs {
			wds = append(wds, r.d.wd)
		}
		w.mu.Unlock()
		live := liveWDs(t, w.fd)
		for _, wd := range wds {
			require.True(t, wd < 0 || live[wd], "round %d: registered wd %d, which the kernel no longer has", rounds, wd)
		}
		if s.recheck(gen) {
			require.NoError(t, os.WriteFile(file, []byte(fmt.Sprint(rounds)), 0o644))
			require.False(t, s.recheck(gen) || s.unchanged(gen), "round %d: written after arming, and still clean", rounds)
		}
		s.Close()
	}
	t.Logf("%d rounds, %d given up under contention", rounds, contended)
	require.Less(t, contended, rounds, "no round armed")
}

// fileEntry is the entry of a file reached through no link.
func fileEntry(path string) entry {
	return entry{Route: gitread.Route{Resolved: path}, file: true}
}

// privateWatcher is a watcher of the test's own, so that its watches can be
// counted; closed when the test ends, after every cleanup registered later.
func privateWatcher(t *testing.T) *Watcher {
	t.Helper()
	w, err := newWatcher()
	if err != nil {
		t.Skipf("no watch path here: %v", err)
	}
	t.Cleanup(w.close)
	return w
}

// An arm that fails (a path on a file system whose changes inotify may not
// report) removes the watches it added: dropped subscriptions leave
// nothing in the kernel, counted against fs.inotify.max_user_watches.
// Watches another subscription registered stay.
func TestFailedArmLeavesNoWatch(t *testing.T) {
	const remote = "/dev/pts/ptmx" // devpts: not a file system the watch trusts
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(remote), &st); err != nil || localTypes[int64(st.Type)] != "" {
		t.Skipf("%s is not on a file system the watch refuses here", remote)
	}
	w := privateWatcher(t)
	root := t.TempDir()
	file := filepath.Join(root, "a", "b", "f")
	require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
	require.NoError(t, os.WriteFile(file, nil, 0o644))

	keeper := w.Subscribe()
	_, _, err := keeper.arm([]entry{fileEntry(file)})
	require.NoError(t, err)
	kept := liveWDs(t, w.fd)
	require.NotEmpty(t, kept)

	other := filepath.Join(root, "c", "d", "g")
	require.NoError(t, os.MkdirAll(filepath.Dir(other), 0o755))
	require.NoError(t, os.WriteFile(other, nil, 0o644))
	for i := 0; i < 30; i++ {
		s := w.Subscribe()
		_, _, err := s.arm([]entry{fileEntry(other), fileEntry(remote)})
		require.Error(t, err)
		s.Close()
	}
	assert.Equal(t, kept, liveWDs(t, w.fd), "the watches left once 30 failed arms were dropped")
	keeper.Close()
	assert.Empty(t, liveWDs(t, w.fd), "the watches left once every subscription closed")
}

// A directory on the way that does not exist (a packed branch's loose ref
// directory, refs/heads/release for release/1.2) is not watched, and the
// nearest one that exists reports its creation: the ref made later below
// it makes the subscription dirty.
func TestArmWatchesTheNearestDirectoryThatExists(t *testing.T) {
	w := privateWatcher(t)
	gittest.Still(t, w.MountChanges, func(c *gittest.Trial) {
		root := t.TempDir()
		heads := filepath.Join(root, "refs", "heads")
		require.NoError(t, os.MkdirAll(heads, 0o755))
		ref := filepath.Join(heads, "release", "1.2")
		s := w.Subscribe()
		gen := s.begin()
		_, _, err := s.arm([]entry{{Route: gitread.Route{Resolved: ref}}})
		require.NoError(t, err)
		require.True(c, s.recheck(gen), "clean once armed")
		require.NoError(t, os.Mkdir(filepath.Dir(ref), 0o755))
		assert.False(c, s.recheck(gen), "dirty once the missing directory is made")

		// Armed again with the directory there (and the ref not yet), the
		// ref's creation is seen.
		gen = s.begin()
		_, _, err = s.arm([]entry{{Route: gitread.Route{Resolved: ref}}})
		require.NoError(t, err)
		require.True(c, s.recheck(gen))
		require.NoError(t, os.WriteFile(ref, []byte("x\n"), 0o644))
		assert.False(c, s.recheck(gen), "dirty once the ref is made")
		s.Close()
	})
}

// A subscription whose arming blocks on a file system that stopped
// answering holds up no other: their arming, checks and closing go on.
func TestArmOnAHungFileSystemHoldsUpNoOther(t *testing.T) {
	w, err := newWatcher()
	if err != nil {
		t.Skipf("no watch path here: %v", err)
	}
	hungDone := make(chan error, 1)
	started := false
	t.Cleanup(func() { // after the mount is torn down, which ends the hung arm
		if started {
			<-hungDone
		}
		w.close()
	})
	root := t.TempDir()
	mnt := filepath.Join(root, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	f := fusehang.Mount(t, mnt, nil)
	f.Hang()
	hung := w.Subscribe()
	started = true
	go func() {
		_, _, err := hung.arm([]entry{{Route: gitread.Route{Resolved: mnt}, dir: true}}) // statfs of mnt hangs
		hungDone <- err
	}()
	require.Eventually(t, func() bool { return f.Pending() > 0 }, 5*time.Second, time.Millisecond, "the arm reached the hung file system")

	file := filepath.Join(root, "local", "f")
	require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := w.Subscribe()
		gen := s.begin()
		if _, _, err := s.arm([]entry{fileEntry(file)}); err != nil {
			t.Error(err)
		}
		s.recheck(gen)
		s.unchanged(gen)
		s.Close()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("another subscription's arming, checks and closing waited for the hung arm")
	}
	select {
	case err := <-hungDone:
		t.Fatalf("the arm on the hung file system returned: %v", err)
	default:
	}
}

// An arm of what did not move adds no watch again; a directory on the way
// replaced by another is watched anew, with everything below it, and
// nothing else is; a file written in place moves nothing.
func TestRearmAddsOnlyWhatMoved(t *testing.T) {
	w := privateWatcher(t)
	gittest.Still(t, w.MountChanges, func(c *gittest.Trial) {
		root := t.TempDir()
		a := filepath.Join(root, "a")
		file := filepath.Join(a, "b", "f")
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		require.NoError(t, os.WriteFile(file, []byte("1"), 0o644))
		s := w.Subscribe()
		defer s.Close()
		arm := func() Calls {
			t.Helper()
			before := s.Calls()
			s.begin()
			_, _, err := s.arm([]entry{fileEntry(file)})
			require.NoError(t, err)
			after := s.Calls()
			return Calls{after.Statfs - before.Statfs, after.AddWatch - before.AddWatch, after.RmWatch - before.RmWatch}
		}
		depth := uint64(strings.Count(file, "/")) // every directory from the root down, and the file
		require.Equal(c, depth+1, arm().AddWatch, "the first arm watches every directory and the file")
		assert.Zero(c, arm().AddWatch, "nothing moved")

		require.NoError(t, os.WriteFile(file, []byte("2"), 0o644))
		assert.Zero(c, arm().AddWatch, "a file written in place")

		// a/b replaced by a copy: a/b and the file below it are new.
		copyDir := filepath.Join(a, "b.new")
		require.NoError(t, os.Mkdir(copyDir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(copyDir, "f"), []byte("2"), 0o644))
		require.NoError(t, os.Rename(filepath.Join(a, "b"), filepath.Join(a, "b.old")))
		require.NoError(t, os.Rename(copyDir, filepath.Join(a, "b")))
		calls := arm()
		assert.Equal(c, uint64(2), calls.AddWatch, "the replaced directory and the file in it")
		assert.Equal(c, uint64(2), calls.Statfs)
		gen := s.begin()
		_, _, err := s.arm([]entry{fileEntry(file)})
		require.NoError(t, err)
		require.True(c, s.recheck(gen))
		require.NoError(t, os.WriteFile(file, []byte("3"), 0o644))
		assert.False(c, s.recheck(gen), "a write in the directory that replaced a/b is seen")
	})
}

// A change between a read and the arm of its watches is unreported: Arm
// must see it by what it proves of the read's files afterwards. Here
// objects is swapped, in that window, for a link to a directory
// elsewhere, which git follows: the read's route for objects has no link,
// so nothing watches where the link leads, and a later removal of that
// directory (after which git finds no repository) would raise no event.
// The link leads to another directory, or to the read's own objects
// directory moved there: the same inode, which no stamp tells apart, but
// the route does.
func TestArmDistrustsObjectsSwappedForALinkBeforeItsWatch(t *testing.T) {
	t.Run("another directory", func(t *testing.T) { armAfterObjectsSwap(t, false) })
	t.Run("the same directory, moved", func(t *testing.T) { armAfterObjectsSwap(t, true) })
}

// swapCase makes a checkout (repo, in root, a temporary directory), and
// says whether git still reads the checkout at its first commit.
func swapCase(t *testing.T) (root, dir string, gitSays func() bool) {
	t.Helper()
	gittest.Need(t)
	root = t.TempDir()
	dir = filepath.Join(root, "repo")
	rev := gittest.Init(t, dir, map[string]string{"run_agent.py": "x\n"})
	return root, dir, func() bool {
		out, err := gittest.Command(dir, "rev-parse", "--verify", "HEAD").Output()
		return err == nil && strings.TrimSpace(string(out)) == rev
	}
}

func armAfterObjectsSwap(t *testing.T, sameInode bool) {
	w := privateWatcher(t)
	root, dir, gitSays := swapCase(t)
	s := w.Subscribe()
	defer s.Close()
	r := s.Begin()
	_, deps, routes, _, err := gitread.ReadWith(gitread.System, filepath.Join(dir, "run_agent.py"), gitread.Ask{MustExist: true, Routes: true})
	require.NoError(t, err)
	objects := filepath.Join(dir, ".git", "objects")
	elsewhere := filepath.Join(root, "elsewhere")
	if sameInode {
		require.NoError(t, os.Rename(objects, elsewhere))
	} else {
		require.NoError(t, os.Rename(objects, filepath.Join(root, "old-objects")))
		require.NoError(t, os.Mkdir(elsewhere, 0o755))
	}
	require.NoError(t, os.Symlink(elsewhere, objects))
	require.True(t, gitSays(), "git follows the link")
	// A read that began an hour from now: every stamp is settled, so that
	// only what Arm proves of the files decides.
	require.NoError(t, s.Arm(deps, routes, gitread.System, time.Now().Add(time.Hour)))
	clean := r.Recheck()
	require.NoError(t, os.Rename(elsewhere, elsewhere+".gone"))
	require.False(t, gitSays(), "git once the link leads nowhere")
	assert.False(t, clean && r.Recheck(), "the watch vouches for a checkout git no longer reads")
}

// An event on a watch an arm added, drained by another check before the
// arm registered the watch, reaches no subscription: a change made and
// undone in that window (which leaves every file and route as the read
// found them) must still make the arm distrust what it watched. Here
// .git is a link to a copy of itself while its watch is added, so the
// watch is on the copy, and is put back before the watch is registered;
// a later removal of the real objects (after which git finds no
// repository) raises no event on the copy. The directories are watched
// by this subscription alone, or also by another one, which the events
// then reach instead.
//
// A change of the mount table makes every subscription dirty, rightly,
// and a watch said clean no longer is: each case is run until none came
// while it ran (see gittest.Still).
func TestArmDistrustsAChangeUndoneBeforeItRegisters(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(t *testing.T, c *gittest.Trial, w *Watcher)
	}{
		{"its own watches", func(t *testing.T, c *gittest.Trial, w *Watcher) { armAcrossAnUndoneSwap(t, c, w, false) }},
		{"watches another subscription shares", func(t *testing.T, c *gittest.Trial, w *Watcher) { armAcrossAnUndoneSwap(t, c, w, true) }},
		{"a name new to a directory it keeps", armAcrossAnUndoneSwapInAKeptDirectory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gittest.Need(t)
			w := privateWatcher(t)
			gittest.Still(t, w.MountChanges, func(c *gittest.Trial) { tc.arm(t, c, w) })
		})
	}
}

// Here HEAD moved from main to feature/x: the re-arm keeps its watch of
// refs/heads, in which feature is a name new to it, and adds one of
// refs/heads/feature, which is a link to a copy of itself while that is
// added.
func armAcrossAnUndoneSwapInAKeptDirectory(t *testing.T, c *gittest.Trial, w *Watcher) {
	root := t.TempDir()
	dir := filepath.Join(root, "repo")
	gittest.Init(t, dir, map[string]string{"run_agent.py": "x\n"})
	gittest.Git(t, dir, "branch", "feature/x")
	module := filepath.Join(dir, "run_agent.py")
	s := w.Subscribe()
	defer s.Close()
	arm := func() Read {
		r := s.Begin()
		_, deps, routes, _, err := gitread.ReadWith(gitread.System, module, gitread.Ask{MustExist: true, Routes: true})
		require.NoError(t, err)
		require.NoError(t, s.Arm(deps, routes, gitread.System, time.Now().Add(time.Hour)))
		return r
	}
	r := arm()
	require.True(c, r.Recheck(), "armed on main")
	gittest.Git(t, dir, "symbolic-ref", "HEAD", "refs/heads/feature/x")
	require.False(c, r.Recheck(), "HEAD moved")
	feature := filepath.Join(dir, ".git", "refs", "heads", "feature")
	copied, aside := filepath.Join(root, "copy"), filepath.Join(root, "aside")
	require.NoError(t, exec.Command("cp", "-a", feature, copied).Run())
	w.beforeRegister = func() {
		w.beforeRegister = nil
		require.NoError(t, os.Remove(feature))
		require.NoError(t, os.Rename(aside, feature))
		drainer := w.Subscribe() // another check drains the events
		drainer.Begin().Recheck()
		drainer.Close()
	}
	// arm, with the swap in place while it adds its watches.
	r = s.Begin()
	_, deps, routes, _, err := gitread.ReadWith(gitread.System, module, gitread.Ask{MustExist: true, Routes: true})
	require.NoError(t, err)
	require.NoError(t, os.Rename(feature, aside))
	require.NoError(t, os.Symlink(copied, feature))
	require.NoError(t, s.Arm(deps, routes, gitread.System, time.Now().Add(time.Hour)))
	if !r.Recheck() {
		r = arm() // distrusted: the next read arms on what is there now
		require.True(c, r.Recheck(), "armed again on the checkout as it is")
	}
	gittest.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "on feature")
	assert.False(c, r.Recheck(), "the watch sees the commit that moved refs/heads/feature/x")
}

func armAcrossAnUndoneSwap(t *testing.T, c *gittest.Trial, w *Watcher, shared bool) {
	root, dir, gitSays := swapCase(t)
	dotgit, copied, aside := filepath.Join(dir, ".git"), filepath.Join(root, "copy.git"), filepath.Join(root, "aside.git")
	require.NoError(t, exec.Command("cp", "-a", dotgit, copied).Run())
	module := filepath.Join(dir, "run_agent.py")
	if shared {
		other := w.Subscribe()
		defer other.Close()
		other.Begin()
		_, deps, routes, _, err := gitread.ReadWith(gitread.System, module, gitread.Ask{MustExist: true, Routes: true})
		require.NoError(t, err)
		require.NoError(t, other.Arm(deps, routes, gitread.System, time.Now().Add(time.Hour)))
	}
	s := w.Subscribe()
	defer s.Close()
	r := s.Begin()
	_, deps, routes, _, err := gitread.ReadWith(gitread.System, module, gitread.Ask{MustExist: true, Routes: true})
	require.NoError(t, err)
	require.NoError(t, os.Rename(dotgit, aside))
	require.NoError(t, os.Symlink(copied, dotgit))
	w.beforeRegister = func() {
		require.NoError(t, os.Remove(dotgit))
		require.NoError(t, os.Rename(aside, dotgit))
		drainer := w.Subscribe() // another check drains the events
		drainer.Begin().Recheck()
		drainer.Close()
	}
	require.NoError(t, s.Arm(deps, routes, gitread.System, time.Now().Add(time.Hour)))
	w.beforeRegister = nil
	if r.Recheck() {
		objects := filepath.Join(dotgit, "objects")
		require.NoError(t, os.Rename(objects, objects+".gone"))
		require.False(t, gitSays(), "git once objects is gone")
		assert.False(c, r.Recheck(), "the watch vouches for a checkout git no longer reads")
		return
	}
	// Distrusted: the next read arms on what is there now, and sees.
	r = s.Begin()
	_, deps, routes, _, err = gitread.ReadWith(gitread.System, module, gitread.Ask{MustExist: true, Routes: true})
	require.NoError(t, err)
	require.NoError(t, s.Arm(deps, routes, gitread.System, time.Now().Add(time.Hour)))
	require.True(c, r.Recheck(), "armed again on the checkout as it is")
	objects := filepath.Join(dotgit, "objects")
	require.NoError(t, os.Rename(objects, objects+".gone"))
	require.False(t, gitSays(), "git once objects is gone")
	assert.False(c, r.Recheck(), "the watch of the checkout as it is sees objects go")
}

// What an arm learns of the events drained while it armed is bounded:
// past maxTouched names, every arm that was under way counts as touched,
// whichever watch the later events were in. An arm counts only events
// drained after it began.
func TestTouchedIsBoundedAndErrsTowardDistrust(t *testing.T) {
	w := privateWatcher(t)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armers = 1
	want := map[string]map[string]bool{"/a": {"HEAD": true}}
	dirWDs := map[string]int32{"/a": 7}
	before := w.events
	w.touch(7, "unrelated")
	assert.False(t, w.touchedSince(before, want, dirWDs, nil, nil), "a name the arm does not need")
	w.touch(7, "HEAD")
	assert.True(t, w.touchedSince(before, want, dirWDs, nil, nil), "a name it needs")
	after := w.events
	assert.False(t, w.touchedSince(after, want, dirWDs, nil, nil), "an event before the arm began")
	w.touch(8, "")
	assert.True(t, w.touchedSince(before, nil, nil, nil, map[string]int32{"/f": 8}), "a file's own watch")
	assert.True(t, w.touchedSince(before, want, nil, map[string]*dir{"/a": {wd: 7}}, nil), "a directory's watch kept")
	for i := 0; w.touchedNames < maxTouched; i++ {
		w.touch(1, strconv.Itoa(i))
	}
	assert.Zero(t, w.touchedAll, "within the bound")
	last := w.events
	w.touch(2, "x")
	assert.LessOrEqual(t, w.touchedNames, maxTouched)
	assert.True(t, w.touchedSince(last, want, dirWDs, nil, nil), "past the bound, any event counts")
	assert.False(t, w.touchedSince(w.events, want, dirWDs, nil, nil), "but not one before the arm began")
}
