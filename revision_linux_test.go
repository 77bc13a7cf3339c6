package runtimeguard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/fusehang"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/runtimeguard/runtimeguard/internal/systemd"
	"github.com/runtimeguard/runtimeguard/internal/updater"
	"github.com/runtimeguard/runtimeguard/internal/watch"
)

// A writer writes content at offset 0 of the file at path by one class of
// write and returns what ends it (closes its descriptor, unmaps its
// mapping); a class the kernel refuses here is skipped with the reason.
type unseenWriter func(t *testing.T, path string, content []byte) (end func())

// aioWrite writes through Linux AIO (io_setup, io_submit, io_getevents),
// the descriptor kept open until end.
func aioWrite(t *testing.T, path string, content []byte) func() {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	var ctx uintptr
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		f.Close()
		t.Skipf("io_setup: %v", e)
	}
	defer unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
	// struct iocb: aio_data, aio_key and aio_rw_flags, aio_lio_opcode,
	// aio_reqprio, aio_fildes, aio_buf, aio_nbytes, aio_offset, reserved,
	// aio_flags, aio_resfd.
	var iocb struct {
		data                uint64
		key, rwFlags        uint32
		opcode              uint16
		reqprio             int16
		fd                  uint32
		buf, nbytes, offset uint64
		reserved            uint64
		flags, resfd        uint32
	}
	const iocbCmdPwrite = 1
	iocb.opcode, iocb.fd = iocbCmdPwrite, uint32(f.Fd())
	iocb.buf, iocb.nbytes = uint64(uintptr(unsafe.Pointer(&content[0]))), uint64(len(content))
	iocbs := [1]*byte{(*byte)(unsafe.Pointer(&iocb))}
	if n, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, ctx, 1, uintptr(unsafe.Pointer(&iocbs[0]))); e != 0 || n != 1 {
		f.Close()
		t.Fatalf("io_submit: %d, %v", n, e)
	}
	var events [1]struct {
		data, obj uint64
		res, res2 int64
	}
	n, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, ctx, 1, 1, uintptr(unsafe.Pointer(&events[0])), 0, 0)
	runtime.KeepAlive(content)
	runtime.KeepAlive(&iocb)
	require.Zero(t, e, "io_getevents")
	require.Equal(t, uintptr(1), n)
	require.Equal(t, int64(len(content)), events[0].res, "the AIO write's result")
	return func() { f.Close() }
}

// uringWrite writes through io_uring (IORING_OP_WRITE), the descriptor kept
// open until end.
func uringWrite(t *testing.T, path string, content []byte) func() {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	// struct io_uring_params: sq_entries, cq_entries, flags, sq_thread_cpu,
	// sq_thread_idle, features, wq_fd, resv[3], then the offsets of the
	// submission ring (head, tail, ring_mask, ring_entries, flags,
	// dropped, array, resv1, user_addr) and of the completion ring (head,
	// tail, ring_mask, ring_entries, overflow, cqes, flags, resv1,
	// user_addr).
	var params struct {
		sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
		resv                                                                   [3]uint32
		sq                                                                     struct {
			head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
			userAddr                                                        uint64
		}
		cq struct {
			head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
			userAddr                                                        uint64
		}
	}
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	if e != 0 {
		f.Close()
		t.Skipf("io_uring_setup refused here: %v", e)
	}
	defer unix.Close(int(fd))
	const featSingleMmap = 1
	if params.features&featSingleMmap == 0 {
		f.Close()
		t.Skip("io_uring without IORING_FEAT_SINGLE_MMAP (Linux before 5.4)")
	}
	ringSize := max(int(params.sq.array+params.sqEntries*4), int(params.cq.cqes+params.cqEntries*16))
	ring, err := unix.Mmap(int(fd), 0, ringSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	require.NoError(t, err)
	defer unix.Munmap(ring)
	const offSQEs = 0x10000000
	sqes, err := unix.Mmap(int(fd), offSQEs, int(params.sqEntries)*64, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	require.NoError(t, err)
	defer unix.Munmap(sqes)
	u32 := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }

	// One submission queue entry: opcode, flags, ioprio, fd, off, addr,
	// len, rw_flags, user_data.
	const opWrite = 23
	sqe := sqes[:64]
	clear(sqe)
	sqe[0] = opWrite
	binary.NativeEndian.PutUint32(sqe[4:], uint32(f.Fd()))
	binary.NativeEndian.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(&content[0]))))
	binary.NativeEndian.PutUint32(sqe[24:], uint32(len(content)))
	tail := atomic.LoadUint32(u32(ring, params.sq.tail))
	*u32(ring, params.sq.array+(tail&*u32(ring, params.sq.ringMask))*4) = 0
	atomic.StoreUint32(u32(ring, params.sq.tail), tail+1)
	const enterGetEvents = 1
	n, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, fd, 1, 1, enterGetEvents, 0, 0)
	runtime.KeepAlive(content)
	if e != 0 {
		f.Close()
		t.Skipf("io_uring_enter refused here: %v", e)
	}
	require.Equal(t, uintptr(1), n)
	head := atomic.LoadUint32(u32(ring, params.cq.head))
	require.NotEqual(t, head, atomic.LoadUint32(u32(ring, params.cq.tail)), "a completion")
	cqe := ring[params.cq.cqes+(head&*u32(ring, params.cq.ringMask))*16:]
	res := int32(binary.NativeEndian.Uint32(cqe[8:]))
	atomic.StoreUint32(u32(ring, params.cq.head), head+1)
	if res < 0 {
		f.Close()
		t.Skipf("io_uring's write refused here: %v", unix.Errno(-res))
	}
	require.Equal(t, int32(len(content)), res, "the io_uring write's result")
	return func() { f.Close() }
}

// mmapWrite writes through a shared mapping of the file, the descriptor
// closed at once and the mapping kept until end, as mmap allows.
func mmapWrite(t *testing.T, path string, content []byte) func() {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	mem, err := unix.Mmap(int(f.Fd()), 0, len(content), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	f.Close()
	require.NoError(t, err)
	copy(mem, content)
	return func() { _ = unix.Munmap(mem) }
}

// spliceWrite moves the content from a pipe into the file with splice(2),
// the descriptor kept open until end.
func spliceWrite(t *testing.T, path string, content []byte) func() {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	var p [2]int
	require.NoError(t, unix.Pipe(p[:]))
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	_, err = unix.Write(p[1], content)
	require.NoError(t, err)
	var off int64
	n, err := unix.Splice(p[0], nil, int(f.Fd()), &off, len(content), 0)
	if err != nil {
		f.Close()
		t.Skipf("splice refused here: %v", err)
	}
	require.Equal(t, int64(len(content)), n)
	return func() { f.Close() }
}

// namespaceWrite writes the file in place from another mount namespace,
// through a bind mount of its directory made there.
func namespaceWrite(t *testing.T, path string, content []byte) func() {
	mnt := tempDir(t)
	script := `mount --bind "$1" "$2" && printf %s "$3" > "$2/$4"`
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
		filepath.Dir(path), mnt, string(content), filepath.Base(path)).CombinedOutput()
	if err != nil {
		t.Skipf("no mount namespace of our own here: %v: %s", err, out)
	}
	return func() {}
}

// refToMove makes a checkout whose branch is a loose ref at rev, and a
// commit moved it may name: what a write of ref moves HEAD to.
func refToMove(t *testing.T) (dir, module, ref, rev, moved string) {
	dir = tempDir(t)
	module, rev = agentRepo(t, dir)
	moved = gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")
	git(t, dir, "reset", "-q", "--hard", rev)
	return dir, module, filepath.Join(dir, ".git", "refs", "heads", "main"), rev, moved
}

// threePaths binds three guards to module, each checked once: one on the
// watch path, one on the stat path with every stamp settled, and one that
// reads on every check.
func threePaths(t *testing.T, module string) (w, stat, read *Guard) {
	t.Helper()
	w = watched(t, module, watchEnv(t))
	stat, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, settledEnv())
	require.NoError(t, err)
	require.NoError(t, stat.EnsureCurrent())
	require.Equal(t, "stat", stat.Observe().Check)
	read, err = New(Options{ModulePath: module, HomeDir: tempDir(t), Check: "read"})
	require.NoError(t, err)
	require.NoError(t, read.EnsureCurrent())
	return w, stat, read
}

// The classes of write that raise no inotify event, each a real write of
// a branch's loose ref in a real repository: git names the new commit at
// once, a guard on the stat path and one that reads on every check say
// stale, and a guard on the watch path keeps saying current until the
// writer closes the file or ends its mapping (docs/checking.md lists
// them). The classes the kernel does report (io_uring, splice, a write
// from another mount namespace) are shown seen: on a kernel that does not
// report one, this fails and the list is to be read again.
func TestWatchPathUnseenWrites(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc")
	}
	for _, c := range []struct {
		name  string
		write unseenWriter
		// seen: the watch path sees the write; closeSeen: it sees it once
		// the writer ends.
		seen, closeSeen bool
	}{
		{"aio", aioWrite, false, true},
		{"io_uring", uringWrite, true, true},
		{"mmap", mmapWrite, false, true},
		{"splice", spliceWrite, true, true},
		{"another mount namespace", namespaceWrite, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mountsStill(t, func(ct *gittest.Trial) {
				dir, module, ref, _, moved := refToMove(t)
				_, err := os.Stat(ref)
				require.NoError(t, err, "the branch is a loose ref")

				w, stat, read := threePaths(t, module)
				require.NoError(t, w.EnsureCurrent())

				end := c.write(t, ref, []byte(moved+"\n"))
				ended := false
				defer func() {
					if !ended {
						end()
					}
				}()
				assert.Equal(t, moved, git(t, dir, "rev-parse", "HEAD"), "git names the new commit")
				for name, g := range map[string]*Guard{"stat path": stat, "read path": read} {
					var se *StaleError
					if assert.ErrorAs(t, g.EnsureCurrent(), &se, "%s: the write is seen", name) {
						assert.Equal(t, moved, se.Current, name)
					}
				}
				err = w.EnsureCurrent()
				if c.seen {
					assert.ErrorIs(ct, err, ErrStale, "the watch path sees a write of %s", c.name)
					return
				}
				assert.NoError(ct, err, "the watch path says current: %s raises no inotify event", c.name)
				assert.NoError(ct, w.EnsureCurrent(), "and again")

				end()
				ended = true
				err = w.EnsureCurrent()
				if c.closeSeen {
					assert.ErrorIs(ct, err, ErrStale, "the writer's close is seen")
				} else {
					assert.NoError(ct, err, "nothing the writer ends raises an event either")
				}
			})
		})
	}
}

// A later write through a shared mapping, to a page the first write
// dirtied and that was not written back since, faults no more, so the
// kernel updates no time of the file: the stat path says current too, and
// only a guard that reads on every check (Options.Check "read") sees what
// git sees.
func TestWatchAndStatPathUnseenMappedRewrite(t *testing.T) {
	mountsStill(t, func(ct *gittest.Trial) {
		dir, module, ref, rev, moved := refToMove(t)

		// The writer maps the ref and writes what it holds: the first write
		// fault stamps the file, before any guard binds.
		f, err := os.OpenFile(ref, os.O_RDWR, 0)
		require.NoError(t, err)
		mem, err := unix.Mmap(int(f.Fd()), 0, len(moved)+1, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		f.Close()
		require.NoError(t, err)
		defer unix.Munmap(mem)
		copy(mem, rev+"\n")
		before, err := os.Stat(ref)
		require.NoError(t, err)

		w, stat, read := threePaths(t, module)

		// The same mapping, written again.
		copy(mem, moved+"\n")
		after, err := os.Stat(ref)
		require.NoError(t, err)
		if !after.ModTime().Equal(before.ModTime()) {
			t.Skip("the page was written back between the writes: the second write faulted and stamped the file")
		}

		assert.Equal(t, moved, git(t, dir, "rev-parse", "HEAD"), "git names the new commit")
		assert.NoError(ct, w.EnsureCurrent(), "the watch path says current")
		assert.NoError(t, stat.EnsureCurrent(), "the stat path says current: no time of the file changed")
		var se *StaleError
		if assert.ErrorAs(t, read.EnsureCurrent(), &se, "a guard that reads on every check sees it") {
			assert.Equal(t, moved, se.Current)
		}
	})
}

// countingEnv is the watch path's environment, counting full reads (each
// reads the repository's config once; an unchanged index is not read
// again).
func countingEnv(t testing.TB) (*env, *atomic.Int64) {
	t.Helper()
	e := watchEnv(t)
	var reads atomic.Int64
	fsys := *gitread.System
	fsys.ReadFile = func(path string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		if filepath.Base(path) == "config" {
			reads.Add(1)
		}
		return fsread.ReadRegular(path, limit, nofollow)
	}
	e.git = &fsys
	return e, &reads
}

// watched binds a guard on the watch path and checks until it is there.
func watched(t *testing.T, module string, e *env) *Guard {
	t.Helper()
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g), "the guard took the watch path")
	// A first read of files too recent to trust reads once more, now
	// watched: let it happen before the caller measures.
	require.NoError(t, g.EnsureCurrent())
	o := g.Observe()
	require.Equal(t, "watch", o.Check)
	return g
}

// writeRef replaces the branch's loose ref as git does: a lock file
// renamed over it.
func writeRef(t *testing.T, dir, rev string) {
	t.Helper()
	ref := filepath.Join(dir, ".git", "refs", "heads", "main")
	require.NoError(t, os.WriteFile(ref+".lock", []byte(rev+"\n"), 0o644))
	require.NoError(t, os.Rename(ref+".lock", ref))
}

// A check that begins after a rename returned sees it, every time: the
// kernel queues the event inside the rename.
func TestWatchSeesARenameAtOnce(t *testing.T) {
	dir := tempDir(t)
	module, first := agentRepo(t, dir)
	second := commit(t, dir, "run_agent.py", "x = 2\n")
	writeRef(t, dir, first)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	require.Equal(t, first, g.Identity().Revision)

	rounds := loopLength(2000, 200)
	misses := 0
	for i := 0; i < rounds; i++ {
		writeRef(t, dir, second)
		if g.EnsureCurrent() == nil {
			misses++
		}
		writeRef(t, dir, first)
		if g.EnsureCurrent() != nil {
			misses++
		}
	}
	assert.Zero(t, misses, "checks right after a rename that gave the wrong answer, of %d", 2*rounds)
	assert.True(t, onWatchPath(g))
	t.Logf("%d renames, %d full reads", 2*rounds, reads.Load())
}

// Changes the answer does not depend on cost no full read: another
// branch, FETCH_HEAD, lock files, a chmod of a Git file the answer does
// not read, files elsewhere in the directories watched. (What is at the
// module's own name is a dependency: a chmod of the module file changes
// its stamp, and is read once.)
func TestWatchUnrelatedChangesCostNoRead(t *testing.T) {
	mountsStill(t, func(c *gittest.Trial) { unrelatedChanges(t, c) })
}

// unrelatedChanges makes changes beside a watched checkout that change
// nothing its answer depends on, checking after each, and tells c of the
// full reads they cost; then a commit is stale.
func unrelatedChanges(t *testing.T, c *gittest.Trial) {
	dir := tempDir(t)
	module, rev := agentRepo(t, dir)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	before := reads.Load()
	for _, change := range []func(){
		func() { git(t, dir, "branch", "topic") },
		func() { writeFile(t, filepath.Join(dir, ".git", "FETCH_HEAD"), rev+"\t\tbranch 'main' of elsewhere\n") },
		func() { writeFile(t, filepath.Join(dir, ".git", "index.lock"), "") },
		func() { require.NoError(t, os.Remove(filepath.Join(dir, ".git", "index.lock"))) },
		func() { require.NoError(t, os.Chmod(filepath.Join(dir, ".git", "description"), 0o600)) },
		func() { writeFile(t, filepath.Join(dir, "notes.txt"), "unrelated\n") },
		func() { writeFile(t, filepath.Join(filepath.Dir(dir), "sibling.txt"), "unrelated\n") },
	} {
		change()
		require.NoError(t, g.EnsureCurrent())
	}
	assert.Zero(c, reads.Load()-before, "full reads after unrelated changes")
	assert.True(t, onWatchPath(g))

	commit(t, dir, "run_agent.py", "moved\n")
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
}

// An overflowed event queue loses events: every subscription reads again,
// and the answer stays right.
func TestWatchOverflow(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	limit := 16384
	if data, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		fmt.Sscan(strings.TrimSpace(string(data)), &limit)
	}
	junk := filepath.Join(dir, ".git", "junk")
	for i := 0; i <= limit/2+1; i++ { // two events a round
		require.NoError(t, os.WriteFile(junk, nil, 0o644))
		require.NoError(t, os.Remove(junk))
	}
	before := reads.Load()
	require.NoError(t, g.EnsureCurrent())
	assert.Greater(t, reads.Load(), before, "an overflow makes the check read again")
	commit(t, dir, "run_agent.py", "moved\n")
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
}

// A bind mount over refs/heads changes what HEAD resolves to without an
// inotify event: the mount table's change, polled in the same call,
// catches it.
func TestWatchBindMountOverRefs(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	moved := commit(t, dir, "lib.py", "x\n")
	first := git(t, dir, "rev-parse", "HEAD~1")
	writeRef(t, dir, first)
	other := tempDir(t)
	writeFile(t, filepath.Join(other, "main"), moved+"\n")
	g := watched(t, module, watchEnv(t))
	require.NoError(t, g.EnsureCurrent())

	heads := filepath.Join(dir, ".git", "refs", "heads")
	if out, err := gittest.Mount(t, "--bind", other, heads); err != nil {
		t.Skipf("cannot bind-mount here (needs root and mount(8)): %v: %s", err, out)
	}
	require.Equal(t, moved, git(t, dir, "rev-parse", "HEAD"))
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se, "the check right after the mount")
	assert.Equal(t, moved, se.Current)
}

// A guard that cannot watch keeps the stat path and says why; Options.Check "read"
// reads.
func TestCheckPathIsReported(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e := statEnv()
	e.watch = func() (*watch.Watcher, error) { return nil, errors.New("no inotify descriptor left") }
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir}, e)
	require.NoError(t, err)
	o := g.Observe()
	assert.Equal(t, "stat", o.Check)
	assert.Equal(t, "no inotify descriptor left", o.CheckReason)

	g, err = newGuard(Options{ModulePath: module, HomeDir: dir, Check: "read"}, watchEnv(t))
	require.NoError(t, err)
	assert.Equal(t, "read", g.Observe().Check)

	var unbound Guard
	assert.Empty(t, unbound.Observe().Check)
}

// A closed guard checks on the stat path from Close on, and its
// Observation says so at once, before any check.
func TestClosedGuardReportsTheStatPath(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir}, watchEnv(t))
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	require.Equal(t, "watch", g.Observe().Check)
	require.NoError(t, g.Close())
	o := g.Observe()
	assert.Equal(t, "stat", o.Check)
	assert.Equal(t, "the guard is closed", o.CheckReason)
	require.NoError(t, g.EnsureCurrent())
	assert.Equal(t, "stat", g.Observe().Check)
}

// mountsStill runs round until the process's watcher saw no change of the
// mount table while it ran (see gittest.Still): a mount by any process
// makes every subscription read again, rightly, which explains a watch
// path that read or saw what the round says it must not.
func mountsStill(t *testing.T, round func(c *gittest.Trial)) {
	t.Helper()
	w, err := watch.Shared()
	require.NoError(t, err)
	gittest.Still(t, w.MountChanges, round)
}

// releaseRepo makes a checkout whose HEAD is on release/1.2, a branch
// whose name has a slash, and returns its module.
func releaseRepo(t *testing.T, dir string) string {
	t.Helper()
	module, _ := agentRepo(t, dir)
	gittest.Git(t, dir, "checkout", "-q", "-b", "release/1.2")
	gittest.Git(t, dir, "branch", "-q", "-D", "main")
	return module
}

// startWatch runs g.Watch until the test ends and returns the channel of
// its result.
func startWatch(t *testing.T, g *Guard, interval time.Duration) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done, exited := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(exited)
		done <- g.Watch(ctx, interval)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	return done
}

// requireChanged waits for g.Changed, which must fire without a request.
func requireChanged(t *testing.T, g *Guard, why string) {
	t.Helper()
	select {
	case <-g.Changed():
	case <-time.After(10 * time.Second):
		t.Fatalf("Changed did not fire within 10s %s (check path %q: %s)", why, g.Observe().Check, g.Observe().CheckReason)
	}
}

// A packed branch whose name has a slash takes the watch path: the
// missing refs/heads/release is not watched, refs/heads reports its
// creation, and the next commit is seen.
func TestPackedSlashBranchTakesTheWatchPath(t *testing.T) {
	dir := tempDir(t)
	module := releaseRepo(t, dir)
	gittest.Git(t, dir, "pack-refs", "--all")
	_, err := os.Stat(filepath.Join(dir, ".git", "refs", "heads", "release"))
	require.ErrorIs(t, err, os.ErrNotExist, "pack-refs pruned the branch's directory")
	g := watched(t, module, watchEnv(t))
	startWatch(t, g, time.Hour)
	gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")
	requireChanged(t, g, "after a commit on a packed release/1.2")
}

// HEAD on a loose release/1.2, then git pack-refs --all (what gc --auto
// runs after a fetch): Watch still sees the next commit.
func TestWatchSeesACommitAfterPackRefs(t *testing.T) {
	dir := tempDir(t)
	module := releaseRepo(t, dir)
	g := watched(t, module, watchEnv(t))
	startWatch(t, g, time.Hour)
	gittest.Git(t, dir, "pack-refs", "--all")
	require.Eventually(t, func() bool {
		s := g.bound.Load().snap.Load()
		return s != nil && hasDep(s, filepath.Join(dir, ".git", "packed-refs"))
	}, 10*time.Second, time.Millisecond, "Watch read the packed branch")
	gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")
	requireChanged(t, g, "after pack-refs and a commit")
}

// hasDep reports whether the snapshot depends on path.
func hasDep(s *snapshot, path string) bool {
	for _, d := range s.Deps {
		if d.Path == path {
			return true
		}
	}
	return false
}

// relink points the link at path to target, atomically, as a deploy
// flips a "current" link.
func relink(t *testing.T, path, target string) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.Symlink(target, tmp))
	require.NoError(t, os.Rename(tmp, path))
}

// flippable is a checkout reached through a link, current, that can be
// flipped to lead through a FUSE file system of the test's own (whose
// changes inotify does not report) to the same checkout; a guard is
// bound through it on the watch path.
func flippable(t *testing.T) (g *Guard, repo, current, viaFUSE string) {
	t.Helper()
	dir := tempDir(t)
	repo = filepath.Join(dir, "repo")
	agentRepo(t, repo)
	f := hungMount(t, map[string]string{"repo": repo}) // answers: it is never told to hang
	current = filepath.Join(dir, "current")
	require.NoError(t, os.Symlink(repo, current))
	return watched(t, filepath.Join(current, "run_agent.py"), watchEnv(t)), repo, current, filepath.Join(f.Dir, "repo")
}

// A binding that falls back to the stat path re-arms once it can watch
// again.
func TestFallenBackBindingRearms(t *testing.T) {
	g, repo, current, viaFUSE := flippable(t)
	relink(t, current, viaFUSE)
	require.NoError(t, g.EnsureCurrent())
	require.Equal(t, "stat", g.Observe().Check)
	relink(t, current, repo)
	require.NoError(t, g.EnsureCurrent())
	require.NoError(t, g.EnsureCurrent())
	assert.Equal(t, "watch", g.Observe().Check, "re-armed once the link led back to a local file system")
}

// A binding that changes path makes Watch pick its event source again:
// Changed fires on the next commit.
func TestWatchFollowsTheBindingAcrossPaths(t *testing.T) {
	g, repo, current, viaFUSE := flippable(t)
	startWatch(t, g, 20*time.Millisecond)
	relink(t, current, viaFUSE)
	require.Eventually(t, func() bool { return g.Observe().Check == "stat" }, 10*time.Second, time.Millisecond,
		"Watch's check saw the link flipped")
	// The events of the flip are all handled before the commit: only the
	// source Watch waits on now can tell it of the commit.
	time.Sleep(100 * time.Millisecond)
	gittest.Commit(t, repo, "run_agent.py", "class AIAgent: moved = True\n")
	requireChanged(t, g, "after the binding left the watch path and the checkout moved")
}

// Close releases the guard's watches (none it registered stays in the
// kernel unless another subscription holds it), ends Watch, is idempotent
// and safe while checks run; checks after it take the stat path.
func TestCloseReleasesTheWatches(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	g := watched(t, module, watchEnv(t))
	w, err := watch.Shared()
	require.NoError(t, err)
	wds := g.bound.Load().sub.Load().Registered()
	require.NotEmpty(t, wds)
	done := startWatch(t, g, time.Hour)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				assert.NoError(t, g.EnsureCurrent())
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, g.Close())
	require.NoError(t, g.Close())
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not end once the guard was closed")
	}
	require.NoError(t, g.EnsureCurrent())
	assert.Equal(t, "stat", g.Observe().Check)
	assert.Nil(t, g.bound.Load().sub.Load())
	for _, wd := range wds {
		assert.False(t, w.Leaked(wd), "watch %d left in the kernel with no subscription", wd)
	}
}

// A commit made while Watch reads the checkout, after the read looked up
// the branch (at its last look, the route walk's): the read answers the
// revision before it, and the commit's events are drained by the read's
// own arming, not by Watch's wait. Watch
// must still see that the checkout moved (the subscription is dirty), and
// fire Changed with no other event and no check.
func TestWatchSeesACommitMadeDuringItsRead(t *testing.T) {
	dir := tempDir(t)
	module := releaseRepo(t, dir)
	packed := filepath.Join(dir, ".git", "packed-refs")
	var armed atomic.Bool
	var once sync.Once
	e := watchEnv(t)
	fsys := *gitread.System
	fsys.Lstat = func(path string) (fsread.Stamp, error) {
		st, err := gitread.System.Lstat(path)
		if path == packed && armed.Load() {
			// The route walk's look at packed-refs, the read's last.
			once.Do(func() { gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n") })
		}
		return st, err
	}
	e.git = &fsys
	gittest.Git(t, dir, "pack-refs", "--all")
	g := watched(t, module, e)
	startWatch(t, g, time.Hour)
	require.Eventually(t, func() bool {
		s := g.bound.Load().snap.Load()
		return s != nil && s.Claim != nil && !s.Claim.Dirty() && hasDep(s, packed)
	}, 10*time.Second, time.Millisecond, "Watch read the packed branch")
	armed.Store(true)
	// One event, which Watch reads after: the read reads packed-refs
	// again, and the commit is made then.
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(packed, later, later))
	requireChanged(t, g, "after a commit made during the read")
}

// A herd of goroutines checking an unchanged checkout stays on the watch
// path: none of its checks reads the checkout for want of an epoll set to
// poll, however many more goroutines than sets there are, and however
// often the threads polling are preempted (GOMAXPROCS above the cores
// makes the kernel preempt them around their epoll_wait).
//
// The herd runs in a process of its own, whose watcher no other test's
// subscriptions, mounts or leftover work share: the claim is about a
// process whose checkouts do not change.
func TestWatchHerdDoesNoFullRead(t *testing.T) {
	if os.Getenv(herdChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWatchHerdDoesNoFullRead$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), herdChild+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("the herd's process:\n%s", out)
		require.NoError(t, err, "the herd's process failed")
		return
	}
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	steady(t, g, reads)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4 * runtime.NumCPU()))

	const goroutines, checks = 128, 1500
	// A first herd polls every epoll set, each of which reports a change
	// of the mount table made before it once; then a herd during which
	// the table changed again is run again (see mountsStill).
	herd(t, g, goroutines, 50)
	steady(t, g, reads)
	mountsStill(t, func(c *gittest.Trial) {
		before := reads.Load()
		herd(t, g, goroutines, checks)
		assert.Zero(c, reads.Load()-before, "full reads during %d checks of an unchanged checkout from %d goroutines", goroutines*checks, goroutines)
		steady(t, g, reads)
	})
	assert.True(t, onWatchPath(g))
}

// herdChild is set in the environment of the herd's own process.
const herdChild = "RUNTIMEGUARD_TEST_HERD_CHILD"

// herd checks g from goroutines goroutines, checks times each.
func herd(t *testing.T, g *Guard, goroutines, checks int) {
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for i := 0; i < goroutines; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < checks; k++ {
				if err := g.EnsureCurrent(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// steady checks g until a check reads nothing: files written within the
// file system's timestamp granularity are read again until they are old
// enough to trust, and a herd is measured from the steady state after.
func steady(t testing.TB, g *Guard, reads *atomic.Int64) {
	t.Helper()
	for i := 0; i < 100; i++ {
		before := reads.Load()
		require.NoError(t, g.EnsureCurrent())
		if reads.Load() == before {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the checkout never settled: every check reads it")
}

// BenchmarkEnsureCurrentWatchHerd is a check of an unchanged checkout on
// the watch path from 2, 16 and 128 goroutines per GOMAXPROCS (the
// process has 2×GOMAXPROCS epoll sets, at least 4 and at most 64). It
// reports the full reads per check: a check that found no free set to
// poll reads the checkout instead.
func BenchmarkEnsureCurrentWatchHerd(b *testing.B) {
	module := benchSetup(b).modules["loose"]
	for _, par := range []int{2, 16, 128} {
		b.Run(fmt.Sprintf("goroutines=%dxGOMAXPROCS", par), func(b *testing.B) {
			e, reads := countingEnv(b)
			g := watchedGuardIn(b, module, e)
			steady(b, g, reads)
			b.Logf("GOMAXPROCS %d, %d CPUs", runtime.GOMAXPROCS(0), runtime.NumCPU())
			before := reads.Load()
			b.SetParallelism(par)
			benchChecksParallel(b, g)
			b.ReportMetric(float64(reads.Load()-before)/float64(b.N), "fullreads/op")
		})
	}
}

// rewriteAsCommit replaces the index and the branch's loose ref with
// copies of themselves, each through a lock file renamed over it, as a
// commit replaces them: every file the answer depends on that a commit
// writes is a new inode, and the revision stays where it was.
func rewriteAsCommit(tb testing.TB, dir string) {
	tb.Helper()
	for _, p := range []string{filepath.Join(dir, ".git", "index"), filepath.Join(dir, ".git", "refs", "heads", "main")} {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p+".lock", data, 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(p+".lock", p); err != nil {
			tb.Fatal(err)
		}
	}
}

// firstCheckChanges are the changes BenchmarkFirstCheckAfterChange
// measures the next check after: prepare runs untimed before each, so
// that every change starts from the same state.
var firstCheckChanges = []struct {
	name    string
	prepare func(tb testing.TB, dir string)
	change  func(tb testing.TB, dir string)
}{
	{"commit", func(testing.TB, string) {}, rewriteAsCommit},
	{"pack-refs", func(tb testing.TB, dir string) {
		// The branch loose again, as the next commit leaves it.
		rev := gittest.Git(tb, dir, "rev-parse", "HEAD")
		ref := filepath.Join(dir, ".git", "refs", "heads", "main")
		if err := os.WriteFile(ref+".lock", []byte(rev+"\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(ref+".lock", ref); err != nil {
			tb.Fatal(err)
		}
	}, func(tb testing.TB, dir string) { gittest.Git(tb, dir, "pack-refs", "--all") }},
}

// markSyscalls, set from RUNTIMEGUARD_MARK, makes mark stat a path named
// for its argument: the measured check's system calls lie between two
// such stats in a trace (strace -f) of the benchmark.
var markSyscalls = os.Getenv("RUNTIMEGUARD_MARK") != ""

func mark(what string) {
	if markSyscalls {
		_, _ = os.Lstat("/runtimeguard-mark-" + what)
	}
}

// BenchmarkFirstCheckAfterChange is the first check after a change that
// leaves the revision where it was (files a commit replaces, replaced; the
// refs packed): on the watch path a full read and the re-arming of the
// watches, on the stat path the stats and a full read. Each change is
// made, and the guard brought back to its steady state, untimed.
func BenchmarkFirstCheckAfterChange(b *testing.B) {
	for _, tc := range firstCheckChanges {
		for _, path := range []struct {
			name string
			env  func(testing.TB) *env
		}{{"watch", watchEnv}, {"stat", func(testing.TB) *env { return statEnv() }}} {
			b.Run(tc.name+"/"+path.name, func(b *testing.B) {
				dir := tempDir(b)
				module, _ := agentRepo(b, dir)
				g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(b)}, path.env(b))
				if err != nil {
					b.Fatal(err)
				}
				steady := func() {
					for i := 0; i < 3; i++ {
						if err := g.EnsureCurrent(); err != nil {
							b.Fatal(err)
						}
					}
				}
				steady()
				if (path.name == "watch") != onWatchPath(g) {
					b.Fatalf("not on the %s path: %+v", path.name, g.Observe())
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					tc.prepare(b, dir)
					steady()
					tc.change(b, dir)
					b.StartTimer()
					mark("begin")
					if err := g.EnsureCurrent(); err != nil {
						b.Fatal(err)
					}
					mark("end")
				}
				b.StopTimer()
				steady()
				if (path.name == "watch") != onWatchPath(g) {
					b.Fatalf("left the %s path: %+v", path.name, g.Observe())
				}
			})
		}
	}
}

// rearmCalls makes change on a watched checkout whose revision it keeps,
// and returns the system calls the subscription's arming made in the
// first check after it, and in all the checks until the guard is back on
// the watch path with nothing to read.
func rearmCalls(t *testing.T, change func(t testing.TB, dir string)) (first, all watch.Calls) {
	since := func(a, b watch.Calls) watch.Calls {
		return watch.Calls{Statfs: a.Statfs - b.Statfs, AddWatch: a.AddWatch - b.AddWatch, RmWatch: a.RmWatch - b.RmWatch}
	}
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	steady(t, g, reads)
	sub := g.bound.Load().sub.Load()
	before := sub.Calls()
	change(t, dir)
	require.NoError(t, g.EnsureCurrent())
	first = since(sub.Calls(), before)
	steady(t, g, reads)
	require.True(t, onWatchPath(g))
	return first, since(sub.Calls(), before)
}

// Re-arming after a change adds again only the watches whose path now
// leads elsewhere: after a commit's files are replaced, the index and the
// loose ref (new files, each watched itself); after git pack-refs, the new
// packed-refs (and once more at the read after it: its name was not
// watched before, so a move of it until then is not known). Every
// directory watched keeps its watch. (A change of the mount table makes
// every watch be added again, rightly: see mountsStill.)
func TestRearmKeepsWhatDidNotMove(t *testing.T) {
	for _, tc := range []struct {
		name       string
		change     func(t testing.TB, dir string)
		first, all uint64
	}{
		{"commit", rewriteAsCommit, 2, 2},
		{"pack-refs", func(t testing.TB, dir string) { gittest.Git(t, dir, "pack-refs", "--all") }, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mountsStill(t, func(c *gittest.Trial) {
				first, all := rearmCalls(t, tc.change)
				t.Logf("the first check: %+v; until steady: %+v", first, all)
				assert.Equal(c, tc.first, first.AddWatch, "inotify_add_watch calls of the first check")
				assert.Equal(c, tc.first, first.Statfs, "statfs calls of the first check")
				assert.Equal(c, tc.all, all.AddWatch, "inotify_add_watch calls until steady")
				assert.Equal(c, tc.all, all.Statfs, "statfs calls until steady")
			})
		})
	}
}

// A link on the configured path re-pointed between two checks is followed:
// the check after it watches the new route, so that a link on it
// re-pointed next makes the guard stale.
func TestRearmFollowsARetargetedLink(t *testing.T) {
	dir := tempDir(t)
	repo, other := filepath.Join(dir, "repo"), filepath.Join(dir, "other")
	agentRepo(t, repo)
	agentRepo(t, other)
	current, alias := filepath.Join(dir, "current"), filepath.Join(dir, "alias")
	require.NoError(t, os.Symlink(repo, current))
	require.NoError(t, os.Symlink(repo, alias))
	e, reads := countingEnv(t)
	g := watched(t, filepath.Join(current, "run_agent.py"), e)
	steady(t, g, reads)

	relink(t, current, alias) // the same module, through one more link
	require.NoError(t, g.EnsureCurrent())
	steady(t, g, reads)
	require.True(t, onWatchPath(g))

	relink(t, alias, other)
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se, "the link on the new route re-pointed to another checkout")
	assert.ErrorIs(t, se, errElsewhere)
}

// A directory on the way replaced by a copy of itself (the same path, the
// same files' content, another directory) is watched anew: a ref written
// in the copy next makes the guard stale.
func TestRearmWatchesAReplacedDirectory(t *testing.T) {
	dir := tempDir(t)
	module, first := agentRepo(t, dir)
	second := commit(t, dir, "lib.py", "x = 2\n")
	writeRef(t, dir, first)
	e, reads := countingEnv(t)
	g := watched(t, module, e)
	steady(t, g, reads)

	heads := filepath.Join(dir, ".git", "refs", "heads")
	copyDir := heads + ".new"
	require.NoError(t, os.Mkdir(copyDir, 0o755))
	data, err := os.ReadFile(filepath.Join(heads, "main"))
	require.NoError(t, err)
	writeFile(t, filepath.Join(copyDir, "main"), string(data))
	require.NoError(t, os.Rename(heads, heads+".old"))
	require.NoError(t, os.Rename(copyDir, heads))
	require.NoError(t, g.EnsureCurrent(), "the same revision")
	steady(t, g, reads)
	require.True(t, onWatchPath(g))

	writeRef(t, dir, second)
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se, "a ref written in the directory that replaced refs/heads")
	assert.Equal(t, second, se.Current)
}

// threads is the number of this process's OS threads.
func threads(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no thread count in /proc/self/status")
	return 0
}

// boundSlack is how many goroutines or threads besides those blocked on
// the file system may come and go between two counts (a worker about to
// end, the runtime's own).
const boundSlack = 4

// A hung file system holds a fixed number of goroutines and OS threads in
// a process, whatever the number of calls and whatever their paths:
// Observe, New and Close of guards whose home (or checkout) is on it,
// called 1, 4, 16 and 32 times more, each return within ReadTimeout and
// leave no more blocked behind them than the first calls did; calls that
// read the same hung home share its one worker whatever their module
// paths; and calls that each read a directory of their own on it hold at
// most the process's bound of workers (lowered here to maxWorkers), past
// which they fail at once.
func TestAHungFileSystemHoldsAFixedNumberOfGoroutines(t *testing.T) {
	const maxWorkers = 8
	base := bounded.Workers()
	for _, tc := range []struct {
		name string
		call func(t *testing.T, mnt string, i int)
		// paths is set where each call reads a directory of its own on
		// the hung file system: they hold at most maxWorkers.
		paths bool
	}{
		{"Observe on a hung home", func(t *testing.T, mnt string, _ int) {
			_, err := Observe(Options{ModulePath: filepath.Join(mnt, "agent", "run_agent.py"), HomeDir: mnt, ReadTimeout: hangTimeout})
			require.NoError(t, err)
		}, false},
		{"Observe on a hung home, each module in a directory of its own", func(t *testing.T, mnt string, i int) {
			_, err := Observe(Options{ModulePath: filepath.Join(mnt, "..", "plugins", strconv.Itoa(i), "main.py"), HomeDir: mnt, ReadTimeout: hangTimeout})
			require.NoError(t, err)
		}, false},
		{"New on a hung home", func(t *testing.T, mnt string, _ int) {
			g, err := New(Options{ModulePath: filepath.Join(mnt, "..", "agent", "run_agent.py"), HomeDir: mnt, ReadTimeout: hangTimeout})
			assert.ErrorIs(t, err, ErrReadTimeout)
			assert.Nil(t, g)
		}, false},
		{"New on a hung checkout", func(t *testing.T, mnt string, _ int) {
			_, err := New(Options{ModulePath: filepath.Join(mnt, "agent", "run_agent.py"), HomeDir: filepath.Join(mnt, "..", "home"), ReadTimeout: hangTimeout})
			assert.ErrorIs(t, err, ErrReadTimeout)
		}, false},
		{"New on a hung checkout, each module in a directory of its own", func(t *testing.T, mnt string, i int) {
			_, err := New(Options{ModulePath: filepath.Join(mnt, "agent", strconv.Itoa(i), "run_agent.py"), HomeDir: filepath.Join(mnt, "..", "home"), ReadTimeout: hangTimeout})
			assert.ErrorIs(t, err, ErrReadTimeout)
		}, true},
		{"Close of a zero Guard with a hung home", func(t *testing.T, mnt string, _ int) {
			var g Guard
			require.NoError(t, g.Close())
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The workers of the subtests before have ended (their
			// mounts torn down): the bound counts from there.
			require.Eventually(t, func() bool { return bounded.Workers() <= base }, 10*time.Second, time.Millisecond, "workers left by the subtests before")
			defer bounded.SetMaxWorkers(bounded.SetMaxWorkers(bounded.Workers() + maxWorkers))
			tmp := tempDir(t)
			agent := filepath.Join(tmp, "agent")
			agentRepo(t, agent)
			require.NoError(t, os.Mkdir(filepath.Join(tmp, "home"), 0o755))
			f := hungMount(t, map[string]string{"agent": agent})
			// The test's own paths beside the mount: New on a hung home
			// binds a checkout that answers, through "..".
			require.NoError(t, os.Symlink(agent, filepath.Join(filepath.Dir(f.Dir), "agent")))
			t.Setenv("HERMES_HOME", f.Dir)
			f.Hang()
			calls := 0
			call := func(n int) {
				for range n {
					calls++
					done := make(chan struct{})
					go func() { defer close(done); tc.call(t, f.Dir, calls) }()
					select {
					case <-done:
					case <-time.After(2 * DefaultReadTimeout): // the zero Guard's ReadTimeout, and more
						t.Fatalf("a call waited on the hung file system:\n%s", allStacks())
					}
				}
			}
			call(1)
			require.Positive(t, f.Pending(), "no call reached the hung file system")
			pending, goroutines, threads0 := f.Pending(), runtime.NumGoroutine(), threads(t)
			for _, n := range []int{4, 16, 32} {
				call(n)
				if tc.paths {
					assert.LessOrEqual(t, f.Pending(), maxWorkers, "system calls blocked on the hung file system after %d calls more", n)
					assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines+maxWorkers+boundSlack, "goroutines after %d calls more", n)
					assert.LessOrEqual(t, threads(t), threads0+maxWorkers+boundSlack, "OS threads after %d calls more", n)
					continue
				}
				assert.Equal(t, pending, f.Pending(), "system calls blocked on the hung file system after %d calls more", n)
				assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines+boundSlack, "goroutines after %d calls more", n)
				assert.LessOrEqual(t, threads(t), threads0+boundSlack, "OS threads after %d calls more", n)
			}
		})
	}
}

// A check on the watch path whose snapshot was overtaken waits for the
// read that overtook it, and then, where that read's snapshot is dirty
// too, looks itself: the two waits share one ReadTimeout. Here the read
// waited for takes most of it (the test holds it), and the check's own
// look never returns: the check fails closed once ReadTimeout has passed
// since it began to wait, not a whole ReadTimeout after the first wait.
func TestCheckWaitsOneReadTimeoutInAll(t *testing.T) {
	const timeout = time.Second
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	head := filepath.Join(dir, ".git", "HEAD")
	config := filepath.Join(dir, ".git", "config")
	e := watchEnv(t)
	var gated atomic.Bool
	entered := make(chan struct{}, 16)
	release := make(chan struct{}, 16)
	fsys := *gitread.System
	fsys.ReadFile = func(p string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		if p == config && gated.Load() {
			entered <- struct{}{} // a full read reads the config once
			<-release
		}
		return gitread.System.ReadFile(p, limit, nofollow)
	}
	e.git = &fsys
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t), ReadTimeout: timeout}, e)
	require.NoError(t, err)
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g), "the guard took the watch path")
	require.NoError(t, g.EnsureCurrent())
	dirty := func() bool { s := g.bound.Load().snap.Load(); return s.Claim != nil && s.Claim.Dirty() }
	require.False(t, dirty())

	gated.Store(true)
	defer func() {
		gated.Store(false)
		for i := 0; i < cap(release); i++ {
			release <- struct{}{}
		}
	}()
	touch := func(at time.Time) { require.NoError(t, os.Chtimes(head, at, at)) }
	touch(time.Now().Add(time.Hour))
	require.Eventually(t, func() bool { return dirty() || !g.bound.Load().snap.Load().Claim.Unchanged() }, 5*time.Second, time.Millisecond, "the touch of HEAD was seen")

	// A finds the snapshot changed and reads: the test holds its read.
	errA := make(chan error, 1)
	go func() { errA <- g.EnsureCurrent() }()
	<-entered
	// B finds the snapshot overtaken by A's read and waits for it.
	type result struct {
		err  error
		took time.Duration
	}
	resB := make(chan result, 1)
	start := time.Now()
	go func() { err := g.EnsureCurrent(); resB <- result{err, time.Since(start)} }()
	time.Sleep(timeout * 6 / 10)
	// A change during A's read leaves its snapshot dirty: B, once A's read
	// returns, must look itself; its look is held for good.
	touch(time.Now().Add(2 * time.Hour))
	time.Sleep(50 * time.Millisecond)
	release <- struct{}{}
	require.NoError(t, <-errA)
	r := <-resB
	assert.ErrorIs(t, r.err, ErrReadTimeout)
	assert.GreaterOrEqual(t, r.took, timeout*9/10, "B gave up before its ReadTimeout")
	assert.Less(t, r.took, timeout*13/10, "B waited %v in all with ReadTimeout %v", r.took, timeout)
}

// hangTimeout is the ReadTimeout of the tests on a hung file system, and
// hangChecks the checks each makes at once.
const (
	hangTimeout = 200 * time.Millisecond
	hangChecks  = 8
)

// hungMount mounts a FUSE file system of the test's own at a new
// directory, holding links, that stops answering at Hang.
func hungMount(t *testing.T, links map[string]string) *fusehang.FS {
	t.Helper()
	mnt := filepath.Join(tempDir(t), "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	return fusehang.Mount(t, mnt, links)
}

// checksReturn makes hangChecks checks at once, twice over, and requires
// each to return within a bound well under what a blocked check would
// take; it returns their errors.
func checksReturn(t *testing.T, g *Guard) []error {
	t.Helper()
	var errs []error
	for round := 0; round < 2; round++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		done := make(chan struct{})
		for i := 0; i < hangChecks; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := g.EnsureCurrent()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}()
		}
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * hangTimeout):
			mu.Lock()
			n := len(errs)
			mu.Unlock()
			t.Fatalf("%d of %d checks still blocked after %v with ReadTimeout %v", 2*hangChecks-n-(1-round)*hangChecks, hangChecks, 10*hangTimeout, hangTimeout)
		}
	}
	return errs
}

// The stat path of an unchanged checkout whose configured path's link is
// on a file system that stops answering: every check fails closed within
// ReadTimeout, naming the link, and one goroutine at most is blocked on
// the checkout, whatever the number of checks.
func TestStatPathOnAHungFileSystem(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	f := hungMount(t, map[string]string{"agent": dir})
	configured := filepath.Join(f.Dir, "agent", "run_agent.py")
	g, err := newGuard(Options{ModulePath: configured, HomeDir: tempDir(t), ReadTimeout: hangTimeout}, settledEnv())
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	require.Equal(t, gittest.Resolved(t, module), g.Identity().ModulePath)
	require.True(t, trusted(g), "the stat path vouches for the checkout")
	require.Equal(t, "stat", g.Observe().Check)

	f.Hang()
	for _, err := range checksReturn(t, g) {
		assert.ErrorIs(t, err, ErrStale)
		assert.ErrorIs(t, err, ErrReadTimeout)
		assert.ErrorContains(t, err, filepath.Join(f.Dir, "agent"), "the error names what hung")
	}
	// Capture of the path the guard is bound to verifies as a check does.
	captured := make(chan error, 1)
	go func() { captured <- g.Capture(configured) }()
	select {
	case err := <-captured:
		assert.ErrorIs(t, err, ErrReadTimeout)
	case <-time.After(10 * hangTimeout):
		t.Fatal("Capture of the bound path waited on the hung file system")
	}
	// One stat of the link hangs; the stale answers' diagnostics, which
	// resolve the configured path again, hang one more read.
	assert.LessOrEqual(t, f.Pending(), 2, "requests blocked on the hung file system")
}

// A stale answer reads the updater's files: with its home on a file system
// that stops answering, every stale check still returns within
// ReadTimeout, its state unknown, and the diagnostic says why.
func TestStaleAnswerOnAHungHome(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	f := hungMount(t, nil)
	g, err := newGuard(Options{ModulePath: module, HomeDir: f.Dir, ReadTimeout: hangTimeout}, settledEnv())
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")

	f.Hang()
	for _, err := range checksReturn(t, g) {
		var se *StaleError
		require.ErrorAs(t, err, &se)
		assert.NoError(t, se.Err, "the checkout itself was read")
		assert.Equal(t, UpdateUnknown, se.State)
	}
	start := time.Now()
	o := g.Observe()
	assert.Less(t, time.Since(start), 10*hangTimeout)
	assert.Equal(t, UpdateUnknown, o.State)
	assert.Equal(t, MarkerUnknown, o.Marker)
	assert.Contains(t, o.MarkerReason, "return")
	assert.Contains(t, o.MarkerReason, ErrReadTimeout.Error())
	assert.Equal(t, filepath.Join(f.Dir, ".hermes-update-in-progress"), o.MarkerPath)
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}

// The same for the venv's root, searched for recovery markers, on a hung
// file system: the interpreter lives in <root>/venv/bin.
func TestStaleAnswerOnAHungVenvRoot(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	f := hungMount(t, nil)
	python := filepath.Join(f.Dir, "venv", "bin", "python")
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t), Python: python, ReadTimeout: hangTimeout}, settledEnv())
	require.NoError(t, err)
	gittest.Commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")

	f.Hang()
	for _, err := range checksReturn(t, g) {
		var se *StaleError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, UpdateUnknown, se.State)
	}
	o := g.Observe()
	assert.Equal(t, UpdateUnknown, o.State)
	assert.Contains(t, o.InstallRoots, f.Dir)
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}

// A read of the updater's files whose install root hangs answers its
// caller with what it read (the home's marker absent, the root not read)
// rather than nothing: the reads it makes elsewhere end a little before
// its caller gives up, not a little after. Observe (the package's) and a
// guard's Observe, each the first read of a hung root of its own.
func TestObserveOnAHungVenvRootSaysWhatItRead(t *testing.T) {
	for _, how := range []string{"Observe", "Guard.Observe"} {
		for round := range 3 {
			t.Run(fmt.Sprintf("%s, round %d", how, round), func(t *testing.T) {
				dir := tempDir(t)
				module, _ := agentRepo(t, dir)
				f := hungMount(t, nil)
				opts := Options{ModulePath: module, HomeDir: tempDir(t), Python: filepath.Join(f.Dir, "venv", "bin", "python"), ReadTimeout: hangTimeout}
				var o Observation
				if how == "Observe" {
					f.Hang()
					var err error
					o, err = Observe(opts)
					require.NoError(t, err)
				} else {
					g, err := newGuard(opts, settledEnv())
					require.NoError(t, err)
					f.Hang()
					o = g.Observe()
				}
				assert.Equal(t, MarkerAbsent, o.Marker, "the home's marker was read: %s", o.MarkerReason)
				assert.Equal(t, UpdateUnknown, o.State, "the install root was not read")
				assert.Contains(t, o.InstallRoots, f.Dir)
			})
		}
	}
}

// hungHome is a guard on a checkout that answers, whose updater's home is
// reached through a link on a file system that stops answering at
// f.Hang, with the layout's receipt and lock; the checkout has moved one
// commit since it bound.
func hungHome(t *testing.T, timeout time.Duration) (*reloadCase, *fusehang.FS) {
	t.Helper()
	tmp := tempDir(t)
	home := filepath.Join(tmp, "home")
	c := &reloadCase{dir: filepath.Join(home, "hermes-agent"), layout: HermesLayout}
	require.NoError(t, os.MkdirAll(home, 0o755))
	f := hungMount(t, map[string]string{"home": home})
	c.home = filepath.Join(f.Dir, "home")
	c.layout.Lock = "update.lock"
	c.module, c.loaded = agentRepo(t, c.dir)
	var err error
	c.g, err = New(Options{ModulePath: c.module, HomeDir: c.home, Layout: c.layout, ReadTimeout: timeout})
	require.NoError(t, err)
	t.Cleanup(func() { c.g.Close() })
	c.moved = commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	return c, f
}

// awaitPending waits until a call is blocked on the hung file system f.
func awaitPending(t *testing.T, f *fusehang.FS) {
	t.Helper()
	require.Eventually(t, func() bool { return f.Pending() > 0 }, 10*time.Second, time.Millisecond, "no call reached the hung file system")
}

// New with the updater's home on a file system that does not answer
// returns within ReadTimeout, with an error matching ErrReadTimeout, as
// it does for a checkout that does not answer.
func TestNewWithAHungHome(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	f := hungMount(t, map[string]string{"home": tempDir(t)})
	f.Hang()
	made := make(chan error, 1)
	go func() {
		_, err := New(Options{ModulePath: module, HomeDir: filepath.Join(f.Dir, "home"), ReadTimeout: hangTimeout})
		made <- err
	}()
	select {
	case err := <-made:
		assert.ErrorIs(t, err, ErrReadTimeout)
		assert.ErrorContains(t, err, "receipts")
	case <-time.After(10 * hangTimeout):
		t.Fatalf("New waited on the hung home:\n%s", allStacks())
	}
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}

// Close returns at once while a Plan.Bind waits on a home that does not
// answer (Plan.Bind holds no lock of the guard while it reads), and the
// Plan.Bind returns once its context ends.
func TestCloseWithAPlanBindHung(t *testing.T) {
	c, f := hungHome(t, time.Hour)
	c.success(t)
	require.ErrorIs(t, c.g.EnsureCurrent(), ErrStale)
	r, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer r.Release()

	f.Hang()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rebound := make(chan error, 1)
	go func() { rebound <- r.Bind(ctx) }()
	awaitPending(t, f)
	closed := make(chan struct{})
	go func() { c.g.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the Plan.Bind blocked on the hung home")
	}
	cancel()
	select {
	case err := <-rebound:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Plan.Bind went on waiting for the hung home after its context ended")
	}
	assert.Equal(t, c.loaded, c.g.Identity().Revision, "the guard stays on the old code")
}

// A Reloader whose plan waits on a home that does not answer stops within
// ReadTimeout once its context ends: Done closes.
func TestReloaderDoneWithAHungHome(t *testing.T) {
	c, f := hungHome(t, hangTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl, err := NewReloader(ctx, c.g, ReloaderOptions{
		Restart:       func(context.Context, *Plan) error { return nil },
		ProofInterval: 10 * time.Millisecond,
	})
	require.NoError(t, err)
	f.Hang()
	require.ErrorIs(t, c.g.EnsureCurrent(), ErrStale) // the Reloader plans from now on
	require.Eventually(t, func() bool { return rl.plans.Load() > 0 }, 10*time.Second, time.Millisecond, "no plan began")
	cancel()
	select {
	case <-rl.Done():
	case <-time.After(10 * hangTimeout):
		t.Fatal("the Reloader's Done stayed open after its context ended, with the home hung")
	}
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}

// A Reloader whose notification socket's path is on a file system that
// stopped answering (its READY=1 waits on the path's lookup) is done
// within about a second once its context ends, as Done promises, and so
// is Notify; the sends hold one system call blocked on the path.
func TestReloaderDoneWithAHungNotifySocket(t *testing.T) {
	f := hungMount(t, map[string]string{"run": tempDir(t)})
	t.Setenv("NOTIFY_SOCKET", filepath.Join(f.Dir, "run", "notify"))
	c := newReloadCase(t)
	f.Hang()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl, err := NewReloader(ctx, c.g, ReloaderOptions{Restart: func(context.Context, *Plan) error { return nil }})
	require.NoError(t, err)
	awaitPending(t, f) // its READY=1 waits on the path
	cancel()
	select {
	case <-rl.Done():
	case <-time.After(2 * systemd.Timeout): // a bound on a hang: Done promises a second
		t.Fatalf("the Reloader's Done stayed open after its context ended, with the notification socket's path hung:\n%s", allStacks())
	}
	sent := make(chan error, 1)
	go func() { sent <- Notify("RELOADING=1") }()
	select {
	case err := <-sent:
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	case <-time.After(2 * systemd.Timeout):
		t.Fatal("Notify waited on the hung path past its deadline")
	}
	assert.Equal(t, 1, f.Pending(), "system calls blocked on the hung path")
}

// The uids of the access tests: the server's user, and another one.
const (
	serverUID = 65534
	otherUID  = 54321
)

// envOwnerChild makes the test binary a server for TestAccessChangeOfObjects:
// it binds a guard to the module the variable names and answers a check
// for each line on its standard input.
const envOwnerChild = "RUNTIMEGUARD_TEST_ACCESS_CHILD"

// TestAccessChild is the server process of TestAccessChangeOfObjects; it
// does nothing in a test run of its own.
func TestAccessChild(t *testing.T) {
	module := os.Getenv(envOwnerChild)
	if module == "" {
		t.Skip("run by TestAccessChangeOfObjects only")
	}
	g, err := New(Options{ModulePath: module, HomeDir: os.Getenv("RUNTIMEGUARD_TEST_HOME"), Check: map[bool]string{true: "stat"}[os.Getenv("RUNTIMEGUARD_TEST_NOWATCH") != ""]})
	if err != nil {
		fmt.Println("error", err)
		return
	}
	// Checks until every stamp is old enough to trust: then a check is
	// one stat of each dependency (or one epoll_wait).
	for deadline := time.Now().Add(400 * time.Millisecond); time.Now().Before(deadline); {
		_ = g.EnsureCurrent()
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Println("ready", g.Identity().Revision, g.Observe().Check)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "drop" { // to the server's uid and group, for good
			if err := syscall.Setresgid(serverUID, serverUID, serverUID); err != nil {
				fmt.Println("error", err)
				continue
			}
			if err := syscall.Setresuid(serverUID, serverUID, serverUID); err != nil {
				fmt.Println("error", err)
				continue
			}
			fmt.Println("dropped")
			continue
		}
		if err := g.EnsureCurrent(); err != nil {
			fmt.Println("stale", strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Println("current")
		}
	}
}

// asUser sets cmd to run as uid, with its group.
func asUser(cmd *exec.Cmd, uid uint32) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	return cmd
}

// chownTree gives everything under root to uid.
func chownTree(t *testing.T, root string, uid int) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	}))
}

// posixACL is the system.posix_acl_access value of entries (tag, perm,
// id), in the kernel's order.
func posixACL(entries ...[3]uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}

// aclFor is an ACL on a directory of mode 0770 whose named user uid has
// perm: the owner, the group and the mask keep rwx, others nothing, so
// that the mode does not change with perm.
func aclFor(uid, perm uint32) []byte {
	const (
		userObj, user, groupObj, mask, other = 0x01, 0x02, 0x04, 0x10, 0x20
		undefined                            = 0xffffffff
	)
	return posixACL(
		[3]uint32{userObj, 7, undefined},
		[3]uint32{user, perm, uid},
		[3]uint32{groupObj, 7, undefined},
		[3]uint32{mask, 7, undefined},
		[3]uint32{other, 0, undefined},
	)
}

// What git asks of a Git directory's objects and refs is access(2) for
// X_OK, as the user it runs as: a change of owner, group or ACL that keeps
// the directory in place and its mode makes git, run as the server's
// user, find no repository. A server process of another uid, bound on the
// stat path and on the watch path, then answers stale, as git run as that
// user does. Real processes: the server is the test binary run with
// another uid, and so is git.
func TestAccessChangeOfObjects(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a directory's owner needs root")
	}
	gittest.Need(t)
	cases := []struct {
		name   string
		before func(t *testing.T, objects string)
		change func(t *testing.T, objects string)
	}{
		{"owner changed, mode 0700 kept", func(t *testing.T, objects string) {
			require.NoError(t, os.Chmod(objects, 0o700))
		}, func(t *testing.T, objects string) {
			require.NoError(t, os.Chown(objects, otherUID, serverUID))
		}},
		{"group changed, mode 0070 kept", func(t *testing.T, objects string) {
			require.NoError(t, os.Chown(objects, otherUID, serverUID))
			require.NoError(t, os.Chmod(objects, 0o070))
		}, func(t *testing.T, objects string) {
			require.NoError(t, os.Chown(objects, otherUID, otherUID))
		}},
		{"ACL entry of the user changed, mode kept", func(t *testing.T, objects string) {
			require.NoError(t, os.Chown(objects, otherUID, otherUID))
			require.NoError(t, os.Chmod(objects, 0o770))
			if err := unix.Setxattr(objects, "system.posix_acl_access", aclFor(serverUID, 7), 0); err != nil {
				t.Skipf("no POSIX ACLs here: %v", err)
			}
		}, func(t *testing.T, objects string) {
			require.NoError(t, unix.Setxattr(objects, "system.posix_acl_access", aclFor(serverUID, 6), 0))
		}},
	}
	for _, path := range []string{"stat", "watch"} {
		for _, tc := range cases {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				t.Parallel() // a server process, a repository and a home of its own
				c := newAccessCase(t)
				dir, rev, home := c.dir, c.rev, c.home
				chownTree(t, dir, serverUID)
				objects := filepath.Join(dir, ".git", "objects")
				tc.before(t, objects)

				gitAs := func() (string, error) {
					cmd := asUser(gittest.Command(dir, "rev-parse", "--verify", "HEAD"), serverUID)
					cmd.Env = append(cmd.Env, "HOME="+home)
					out, err := cmd.CombinedOutput()
					return strings.TrimSpace(string(out)), err
				}
				out, err := gitAs()
				if err != nil {
					t.Skipf("%s cannot run as uid %d here: %v: %s", gittest.Describe(), serverUID, err, out)
				}
				require.Equal(t, rev, out)

				ready, say := c.serve(t, path == "stat", true)
				require.Equal(t, "ready "+rev+" "+path, ready, "the server binds on the %s path", path)
				ask := func() string { return say("check") }
				require.Equal(t, "current", ask())

				tc.change(t, objects)
				out, err = gitAs()
				require.Error(t, err, "git as uid %d after the change: %s", serverUID, out)
				assert.Contains(t, out, "not a git repository")
				for _, when := range []string{"right after the change", "on the next check"} {
					assert.True(t, strings.HasPrefix(ask(), "stale "), "%s", when)
				}
			})
		}
	}
}

// A server that binds as root and then drops to its user changes no file:
// what changes is what access(2) says of objects, which only root could
// search. git run as that user then finds no repository, and the stat
// path, which asks access(2) on each check, answers stale. (The watch
// path sees no change of the process's own credentials: see
// docs/checking.md.)
func TestAccessAfterCredentialsDropped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("dropping credentials needs root")
	}
	gittest.Need(t)
	c := newAccessCase(t)
	objects := filepath.Join(c.dir, ".git", "objects")
	require.NoError(t, os.Chown(objects, otherUID, otherUID))
	require.NoError(t, os.Chmod(objects, 0o700))

	ready, say := c.serve(t, true, false)
	require.Equal(t, "ready "+c.rev+" stat", ready)
	require.Equal(t, "current", say("check"), "root searches objects")
	require.Equal(t, "dropped", say("drop"))
	out, err := asUser(gittest.Command(c.dir, "rev-parse", "--verify", "HEAD"), serverUID).CombinedOutput()
	require.Error(t, err, "git as uid %d: %s", serverUID, out)
	assert.True(t, strings.HasPrefix(say("check"), "stale "), "a check after the server dropped to uid %d", serverUID)
}

// accessCase is a repository, a home and a copy of the test binary, in a
// directory every user can search (t.TempDir's are private to root).
type accessCase struct {
	self, dir, module, rev, home string
}

func newAccessCase(t *testing.T) *accessCase {
	t.Helper()
	base := tempDir(t)
	require.NoError(t, os.Chmod(base, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(base), 0o755))
	c := &accessCase{self: filepath.Join(base, "server.test"), dir: filepath.Join(base, "agent"), home: filepath.Join(base, "home")}
	copyExecutable(t, os.Args[0], c.self)
	c.module, c.rev = agentRepo(t, c.dir)
	require.NoError(t, os.Mkdir(c.home, 0o755))
	return c
}

// serve starts the server of the case (TestAccessChild), on the stat path
// or the watch path, as the server's uid or (asServer false) as root. It
// returns the server's first line and what sends it a line and returns
// its answer; the server ends with the test.
func (c *accessCase) serve(t *testing.T, stat, asServer bool) (first string, say func(line string) string) {
	t.Helper()
	cmd := exec.Command(c.self, "-test.run=^TestAccessChild$")
	if asServer {
		asUser(cmd, serverUID)
	}
	cmd.Env = append(os.Environ(), envOwnerChild+"="+c.module, "RUNTIMEGUARD_TEST_HOME="+c.home, "GORACE=atexit_sleep_ms=0")
	if stat {
		cmd.Env = append(cmd.Env, "RUNTIMEGUARD_TEST_NOWATCH=1")
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("the server said nothing more: %v", lines.Err())
		}
		return lines.Text()
	}
	return next(), func(line string) string {
		_, err := io.WriteString(stdin, line+"\n")
		require.NoError(t, err)
		return next()
	}
}

// copyExecutable copies the program at from to to, executable by all.
func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o755))
}

// held is what the process holds that a guard may: descriptors, among
// them pidfds, inotify watches (on every inotify descriptor, from
// /proc/self/fdinfo), and goroutines.
type held struct {
	fds, pidfds, watches, goroutines int
}

// holding counts what the process holds now.
func holding(t *testing.T) held {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	h := held{goroutines: runtime.NumGoroutine()}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue // the descriptor of the listing, closed since
		}
		h.fds++
		switch link {
		case "anon_inode:[pidfd]":
			h.pidfds++
		case "anon_inode:inotify":
			info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", e.Name()))
			require.NoError(t, err)
			h.watches += bytes.Count(info, []byte("\ninotify wd:"))
		}
	}
	return h
}

// settled waits, for up to 10 s, until the process holds no more than
// base, and returns what it holds then.
func settled(t *testing.T, base held) held {
	t.Helper()
	var h held
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		h = holding(t)
		if h.fds <= base.fds && h.pidfds <= base.pidfds && h.watches <= base.watches && h.goroutines <= base.goroutines || time.Now().After(deadline) {
			return h
		}
	}
}

// Closed guards leave nothing behind: guards on the watch path, each
// running Watch, each stale with an update under way (its marker naming a
// live process, which a stale answer keeps a pidfd of), each asked for a
// diagnostic, once closed hold no descriptor, pidfd, inotify watch or
// goroutine.
func TestClosedGuardsHoldNothing(t *testing.T) {
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		t.Skipf("no pidfds here: %v", err)
	} else {
		unix.Close(fd)
	}
	live := sleeper(t)
	round := func(n int) (open held) {
		guards := make([]*Guard, n)
		watching := make([]chan error, n)
		for i := range guards {
			tmp := tempDir(t)
			dir, home := filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
			module, _ := agentRepo(t, dir)
			gittest.WriteMarker(t, filepath.Join(home, hermesMarker), live.Process.Pid, time.Now())
			g, err := New(Options{ModulePath: module, HomeDir: home})
			require.NoError(t, err)
			for j := 0; j < 3 && !onWatchPath(g); j++ {
				require.NoError(t, g.EnsureCurrent())
			}
			require.True(t, onWatchPath(g), "the guard took the watch path")
			watching[i] = make(chan error, 1)
			go func() { watching[i] <- g.Watch(context.Background(), time.Second) }()
			commit(t, dir, "run_agent.py", "class AIAgent: revision = 2\n")
			var se *StaleError
			require.ErrorAs(t, g.EnsureCurrent(), &se)
			require.Equal(t, UpdateActive, se.State)
			assert.Equal(t, UpdateActive, g.Observe().State)
			guards[i] = g
		}
		open = holding(t)
		for i, g := range guards {
			require.NoError(t, g.Close())
			require.NoError(t, <-watching[i], "Watch of a closed guard")
		}
		return open
	}
	round(1)     // what the process keeps for good: the inotify descriptor, its epoll sets
	runtime.GC() // earlier tests' guards, dropped: the collector closes what they hold
	base := settled(t, holding(t))
	const guards = 20
	open := round(guards)
	require.GreaterOrEqual(t, open.pidfds, guards, "each stale answer keeps a pidfd of the marker's process")
	require.Greater(t, open.watches, base.watches, "the guards' inotify watches")
	// Fewer than before is what other tests' guards, dropped and
	// collected meanwhile, released.
	after := settled(t, base)
	assert.LessOrEqual(t, after.pidfds, base.pidfds, "pidfds")
	assert.LessOrEqual(t, after.watches, base.watches, "inotify watches")
	assert.LessOrEqual(t, after.fds, base.fds, "descriptors")
	if !assert.LessOrEqual(t, after.goroutines, base.goroutines, "goroutines") {
		t.Logf("goroutines:\n%s", allStacks())
	}
}

// allStacks is the stacks of the process's goroutines.
func allStacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// countingFS is the file system with every stat and read counted.
func countingFS(n *atomic.Uint64) *gitread.FS {
	fsys := *gitread.System
	sys := gitread.System
	fsys.Stat = func(p string) (fsread.Stamp, error) { n.Add(1); return sys.Stat(p) }
	fsys.Lstat = func(p string) (fsread.Stamp, error) { n.Add(1); return sys.Lstat(p) }
	fsys.ReadFile = func(p string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		n.Add(1)
		return sys.ReadFile(p, limit, nofollow)
	}
	fsys.Open = func(p string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
		n.Add(1)
		return sys.Open(p, limit, nofollow)
	}
	fsys.ReadEnds = nil
	return &fsys
}

// On the watch path, a check of an unchanged install without Git is the
// one system call of every watched check: it stats and reads nothing, and
// a change makes one full read, after which checks are that call again.
func TestInstallWatchPathChecksStatNothing(t *testing.T) {
	root := filepath.Join(tempDir(t), "srv")
	gittest.Release(t, root, "1", buildA)
	gittest.Flip(t, filepath.Join(root, "current"), filepath.Join("releases", "1"))
	module := filepath.Join(root, "current", "run_agent.py")
	e := watchEnv(t)
	var calls atomic.Uint64
	e.git = countingFS(&calls)
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	defer g.Close()
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g), "an install on a local file system is watched")
	require.NoError(t, g.EnsureCurrent())

	// n checks of the unchanged install, back on the watch path first (a
	// mount elsewhere makes it read again, rightly: see mountsStill).
	statNothing := func(n int, why string) {
		mountsStill(t, func(c *gittest.Trial) {
			for i := 0; i < 3 && !onWatchPath(g); i++ {
				require.NoError(t, g.EnsureCurrent())
			}
			reads, before := g.Stats().FullReads, calls.Load()
			for range n {
				require.NoError(t, g.EnsureCurrent())
			}
			assert.Equal(c, before, calls.Load(), "%s stat and read nothing", why)
			assert.Equal(c, reads, g.Stats().FullReads, "%s read nothing in full", why)
		})
	}
	statNothing(1000, "checks of an unchanged install")

	// A write in place is an event: one full read finds the same file.
	gittest.Overwrite(t, filepath.Join(root, "releases", "1", "run_agent.py"), "class AIAgent: edited = True\n")
	require.NoError(t, g.EnsureCurrent())
	statNothing(100, "checks after the read of a write in place")

	gittest.Flip(t, filepath.Join(root, "current"), filepath.Join("releases", "2"))
	assert.ErrorIs(t, g.EnsureCurrent(), ErrStale, "a flip to a release that is not there")
}

// BenchmarkEnsureCurrentWithoutGit is a check of an unchanged install
// without Git (a release behind current, its stamp naming a build): on
// the watch path one epoll_wait, on the stat path (a settled clock) a
// stat of each link on the way, the module and the stamp.
func BenchmarkEnsureCurrentWithoutGit(b *testing.B) {
	root := filepath.Join(b.TempDir(), "srv")
	gittest.Release(b, root, "1", buildA)
	gittest.Flip(b, filepath.Join(root, "current"), filepath.Join("releases", "1"))
	module := filepath.Join(root, "current", "run_agent.py")
	b.Run("watch", func(b *testing.B) {
		benchChecks(b, watchedGuard(b, module))
	})
	b.Run("stat", func(b *testing.B) {
		g := settledGuard(b, module)
		b.Logf("a check stats:%s", depList(g))
		benchChecks(b, g)
	})
}

// watchedGuard binds to module on the watch path and proves it is there.
func watchedGuard(b *testing.B, module string) *Guard {
	return watchedGuardIn(b, module, watchEnv(b))
}

// watchedGuardIn is watchedGuard in the environment e.
func watchedGuardIn(b *testing.B, module string, e *env) *Guard {
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(b)}, e)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := g.EnsureCurrent(); err != nil {
			b.Fatal(err)
		}
	}
	if !onWatchPath(g) {
		b.Fatalf("not on the watch path: %+v", g.Observe())
	}
	return g
}

// BenchmarkEnsureCurrentWatch is a check of an unchanged checkout on the
// watch path: one epoll_wait.
func BenchmarkEnsureCurrentWatch(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		g := watchedGuard(b, module)
		b.Logf("watched for changes of:%s", depList(g))
		benchChecks(b, g)
	})
}

// BenchmarkEnsureCurrentWatchParallel is the same from GOMAXPROCS
// goroutines.
func BenchmarkEnsureCurrentWatchParallel(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		benchChecksParallel(b, watchedGuard(b, module))
	})
}

// BenchmarkEpollWaitFloor is the call a check on the watch path makes: one
// epoll_wait, with a zero timeout, on a set of an inotify descriptor (with
// a watch on a directory) and /proc/self/mountinfo, as the watch path's
// sets are, nothing being queued. It is the floor of that path: what a
// check of an unchanged checkout cannot pay less than. It runs on the
// caller's thread, as the check's does.
func BenchmarkEpollWaitFloor(b *testing.B) {
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, b.TempDir(), unix.IN_MODIFY|unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVE); err != nil {
		b.Fatal(err)
	}
	mounts, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(mounts)
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(ep)
	for _, c := range []struct {
		fd     int
		events uint32
	}{{in, unix.EPOLLIN}, {mounts, unix.EPOLLPRI}} {
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, c.fd, &unix.EpollEvent{Events: c.events, Fd: int32(c.fd)}); err != nil {
			b.Fatal(err)
		}
	}
	var events [4]unix.EpollEvent
	// The mount table's descriptor reports once, when it is new.
	if _, err := unix.EpollWait(ep, events[:], 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, err := unix.EpollWait(ep, events[:], 0); err != nil || n != 0 {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkStaleCheckWatch is a check of a checkout that moved, on the
// watch path: the 409 every request gets during an update and until a
// reload, with no receipt in the home, with one beside it (which the
// answer does not read), and with an active marker (its process asked
// about on each answer), and, in the same run, the check of an unchanged
// checkout it compares with. It reports the full reads of the checkout
// per check and logs the update state answered and the path taken.
func BenchmarkStaleCheckWatch(b *testing.B) {
	for _, tc := range []struct {
		name                    string
		moved, receipts, marker bool
	}{
		{name: "current"},
		{name: "stale-without-receipt", moved: true},
		{name: "stale-with-receipt", moved: true, receipts: true},
		{name: "stale-active-marker", moved: true, marker: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tmp := tempDir(b)
			dir, home := filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
			module, _ := agentRepo(b, dir)
			g, err := newGuard(Options{ModulePath: module, HomeDir: home}, watchEnv(b))
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			want := error(nil)
			if tc.moved {
				moved := commit(b, dir, "run_agent.py", "class AIAgent: revision = 2\n")
				if tc.receipts {
					writeFile(b, filepath.Join(receiptsDir(home), "latest.json"), string(gittest.HermesReceipt(b, "gen1-300-steps-success.json", moved, time.Now())))
				}
				if tc.marker {
					gittest.WriteMarker(b, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
				}
				want = ErrStale
			}
			// Let the files settle, then let the guard take the watch path.
			time.Sleep(50 * time.Millisecond)
			var last error
			for i := 0; i < 3; i++ {
				if last = g.EnsureCurrent(); !errors.Is(last, want) {
					b.Fatal(last)
				}
			}
			if !onWatchPath(g) {
				b.Fatalf("not on the watch path: %+v", g.Observe())
			}
			if se := (*StaleError)(nil); errors.As(last, &se) {
				b.Logf("update state %s", se.State)
			}
			defer reportChecks(b, g)()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := g.EnsureCurrent(); !errors.Is(err, want) {
					b.Fatal(err)
				}
			}
		})
	}
}

// staleCase is a guard on the watch path whose checkout moved, so that
// every check is a stale answer, with the updater's clock under the
// test's hand (the real clock plus ahead).
type staleCase struct {
	g         *Guard
	dir, home string
	marker    string
	ahead     atomic.Int64 // nanoseconds the updater's clock runs ahead
	probes    atomic.Int64 // process probes that ask the system (kill and /proc)
	opens     atomic.Int64 // safe opens of the updater's files
}

func newStaleCase(t *testing.T) *staleCase {
	t.Helper()
	c := &staleCase{}
	tmp := tempDir(t)
	c.dir, c.home = filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
	require.NoError(t, os.MkdirAll(c.home, 0o755))
	c.marker = filepath.Join(c.home, hermesMarker)
	module, _ := agentRepo(t, c.dir)
	e := watchEnv(t)
	now := func() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }
	open := func(path string, limit int64) ([]byte, updater.FileKind, string) {
		c.opens.Add(1)
		return updater.SafeOpen(path, limit)
	}
	u := *e.upd
	u.Now, u.Open = now, open
	u.Probe = func(pid int64) updater.ProcInfo {
		c.probes.Add(1)
		return updater.ProbeProcess(pid)
	}
	e.upd = &u
	g, err := newGuard(Options{ModulePath: module, HomeDir: c.home}, e)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	c.g = g
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g), "the guard took the watch path")
	commit(t, c.dir, "run_agent.py", "class AIAgent: revision = 2\n")
	return c
}

// state makes a stale check and returns the update state it answered,
// after checking that it says what a read of the same files says now.
func (c *staleCase) state(t *testing.T) UpdateState {
	t.Helper()
	time.Sleep(staleReuse) // past the answer before's read
	err := c.g.EnsureCurrent()
	var se *StaleError
	require.ErrorAs(t, err, &se)
	b := c.g.bound.Load()
	o := c.g.config().observeAt(noReceipt, time.Now().Add(c.g.config().timeout), b.installDirs(true)...)
	assert.Equal(t, o.State, se.State, "the stale answer against a read of the updater's files")
	return se.State
}

// sleeper starts a process that lives until the test ends or it is
// killed.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// A marker rewritten in place between two stale answers, and one
// renamed over, are read again: no answer keeps what the file said.
func TestStaleAnswerMarkerRewritten(t *testing.T) {
	c := newStaleCase(t)
	live := sleeper(t)
	gittest.WriteMarker(t, c.marker, live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	assert.Equal(t, UpdateActive, c.state(t))

	// In place: the same file, truncated and written.
	f, err := os.OpenFile(c.marker, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "%d\n%d\n", gittest.ExitedPID(t, processGone), time.Now().Unix())
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, UpdateAbandoned, c.state(t), "the marker names a process that exited")

	// Renamed over.
	tmp := c.marker + ".tmp"
	writeFile(t, tmp, "garbage")
	require.NoError(t, os.Rename(tmp, c.marker))
	assert.Equal(t, UpdateUnknown, c.state(t))

	require.NoError(t, os.Remove(c.marker))
	assert.Equal(t, UpdateUnverified, c.state(t))
}

// The marker's process dies between two stale answers: the same facts,
// judged again, are stale.
func TestStaleAnswerMarkerProcessDies(t *testing.T) {
	c := newStaleCase(t)
	live := sleeper(t)
	gittest.WriteMarker(t, c.marker, live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	assert.Equal(t, UpdateActive, c.state(t))
	require.NoError(t, live.Process.Kill())
	_, _ = live.Process.Wait()
	assert.Equal(t, UpdateAbandoned, c.state(t), "the marker's process is gone")
}

// Stale answers that come within staleReuse of one that read the
// updater's files answer with its read, reading and probing nothing; the
// first after it reads them again and sees the updater's process gone.
func TestStaleAnswersShareARecentRead(t *testing.T) {
	c := newStaleCase(t)
	live := sleeper(t)
	gittest.WriteMarker(t, c.marker, live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	for tries := 0; ; tries++ {
		start := time.Now()
		opens, probes := c.opens.Load(), c.probes.Load()
		var se *StaleError
		require.ErrorAs(t, c.g.EnsureCurrent(), &se)
		n := 0
		for ; n < 20 && time.Since(start) < staleReuse/2; n++ {
			require.ErrorAs(t, c.g.EnsureCurrent(), &se)
			assert.Equal(t, UpdateActive, se.State)
		}
		if time.Since(start) >= staleReuse/2 && tries < 20 {
			continue // the machine paused: again
		}
		require.Equal(t, 20, n)
		// The first check may read (the one before is older); the
		// twenty after it read nothing.
		assert.LessOrEqual(t, c.opens.Load()-opens, int64(1), "safe opens of the updater's files")
		assert.LessOrEqual(t, c.probes.Load()-probes, int64(1), "probes of the updater's process")
		break
	}
	require.NoError(t, live.Process.Kill())
	_, _ = live.Process.Wait()
	assert.Equal(t, UpdateAbandoned, c.state(t), "past staleReuse, the marker's process is gone")
}

// The clock passes the marker's age limit between two stale answers: the
// same facts are stale.
func TestStaleAnswerMarkerAges(t *testing.T) {
	c := newStaleCase(t)
	gittest.WriteMarker(t, c.marker, os.Getpid(), time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	assert.Equal(t, UpdateActive, c.state(t))
	c.ahead.Store(int64(DefaultMaxMarkerAge + time.Minute))
	assert.Equal(t, UpdateAbandoned, c.state(t), "past the age limit")
	c.ahead.Store(0)
	assert.Equal(t, UpdateActive, c.state(t))
}

// A recovery marker made in the install, and removed, between stale
// answers.
func TestStaleAnswerRecoveryMarker(t *testing.T) {
	c := newStaleCase(t)
	assert.Equal(t, UpdateUnverified, c.state(t))
	assert.Equal(t, UpdateUnverified, c.state(t))
	for _, name := range []string{hermesIncomplete, hermesLazy} {
		p := filepath.Join(c.dir, name)
		writeFile(t, p, "")
		assert.Equal(t, UpdateIncomplete, c.state(t), name)
		require.NoError(t, os.Remove(p))
		assert.Equal(t, UpdateUnverified, c.state(t), name+" removed")
	}
}

// A release tombstone (the marker renamed aside by its releaser) made
// beside an absent marker, between stale answers: active while its
// process lives.
func TestStaleAnswerReleaseTombstone(t *testing.T) {
	c := newStaleCase(t)
	assert.Equal(t, UpdateUnverified, c.state(t))
	releaser := sleeper(t)
	tomb := fmt.Sprintf("%s%s%d-%s", c.marker, updater.ReleaseInfix, releaser.Process.Pid, "6f1c2a8e")
	gittest.WriteMarker(t, tomb, releaser.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t))
	require.NoError(t, releaser.Process.Kill())
	_, _ = releaser.Process.Wait()
	assert.Equal(t, UpdateUnverified, c.state(t), "the releaser is gone")
	writeFile(t, c.marker+".cas-claim-1", "")
	assert.Equal(t, UpdateUnknown, c.state(t), "an unresolved artifact")
}

// A profile home appears under the home, with a marker, between stale
// answers; and a marker in a profile home that was there already.
func TestStaleAnswerProfileHomeAppears(t *testing.T) {
	c := newStaleCase(t)
	assert.Equal(t, UpdateUnverified, c.state(t))
	live := sleeper(t)
	profiles := filepath.Join(c.home, "profiles")
	require.NoError(t, os.Mkdir(profiles, 0o755))
	assert.Equal(t, UpdateUnverified, c.state(t))
	work := filepath.Join(profiles, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	assert.Equal(t, UpdateUnverified, c.state(t))
	gittest.WriteMarker(t, filepath.Join(work, hermesMarker), live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t), "a profile's update runs")
	require.NoError(t, os.Remove(filepath.Join(work, hermesMarker)))
	assert.Equal(t, UpdateUnverified, c.state(t))

	// A profile home made with its marker already in it, then moved in.
	other := filepath.Join(c.home, "elsewhere")
	require.NoError(t, os.Mkdir(other, 0o755))
	gittest.WriteMarker(t, filepath.Join(other, hermesMarker), live.Process.Pid, time.Now())
	assert.Equal(t, UpdateUnverified, c.state(t))
	require.NoError(t, os.Rename(other, filepath.Join(profiles, "moved-in")))
	assert.Equal(t, UpdateActive, c.state(t), "a profile home moved in with its marker")
}

// A home on a file system that stops answering (FUSE here), the
// checkout on the watch path: once it stops answering, every stale answer still
// returns within ReadTimeout, unknown, with one request at most blocked
// on it, the checkout itself on the watch path.
func TestStaleAnswerHungHomeOnTheWatchPath(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	f := hungMount(t, nil)
	g, err := newGuard(Options{ModulePath: module, HomeDir: f.Dir, ReadTimeout: hangTimeout}, watchEnv(t))
	require.NoError(t, err)
	defer g.Close()
	for i := 0; i < 3 && !onWatchPath(g); i++ {
		require.NoError(t, g.EnsureCurrent())
	}
	require.True(t, onWatchPath(g))
	commit(t, dir, "run_agent.py", "class AIAgent: moved = True\n")
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, UpdateUnverified, se.State)

	f.Hang()
	time.Sleep(staleReuse) // past the answer before's read
	for _, err := range checksReturn(t, g) {
		require.ErrorAs(t, err, &se)
		assert.NoError(t, se.Err, "the checkout itself was read")
		assert.Equal(t, UpdateUnknown, se.State)
	}
	assert.LessOrEqual(t, f.Pending(), 1, "requests blocked on the hung file system")
}

// A profile home that is a link to a directory not yet made, which is then
// made with a marker in it: no name in the profiles directory changes, yet
// the profile's update runs. The listing of the profile homes may not keep
// the home out.
func TestStaleAnswerProfileHomeLinkTargetAppears(t *testing.T) {
	c := newStaleCase(t)
	live := sleeper(t)
	profiles := filepath.Join(c.home, "profiles")
	require.NoError(t, os.Mkdir(profiles, 0o755))
	target := filepath.Join(filepath.Dir(c.home), "later", "work")
	require.NoError(t, os.Symlink(target, filepath.Join(profiles, "work")))
	// Settled (past the racy margin), so that a listing of the profiles
	// directory is kept.
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, UpdateUnverified, c.state(t))
	assert.Equal(t, UpdateUnverified, c.state(t))

	require.NoError(t, os.MkdirAll(target, 0o755))
	gittest.WriteMarker(t, filepath.Join(target, hermesMarker), live.Process.Pid, time.Now())
	assert.Equal(t, UpdateActive, c.state(t), "the linked profile's update runs")
	fresh, err := New(Options{ModulePath: c.g.bound.Load().configured, HomeDir: c.home, Check: "stat"})
	require.NoError(t, err)
	defer fresh.Close()
	assert.Equal(t, UpdateActive, fresh.Observe().State, "a fresh guard's observation")
}

// Changes made through another name of what the answer depends on: a link
// to a ref file elsewhere, a .git that is a link, a gitdir reached through
// links, a hard link written in place, a file bind-mounted in place. On
// every path, a check after the change is stale where git sees another
// revision.
func TestChangesThroughOtherNames(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(t *testing.T, dir, store string)
		change func(t *testing.T, dir, store, other string)
	}{
		{"a ref that is a link to a file elsewhere, the file replaced",
			func(t *testing.T, dir, store string) {
				ref := filepath.Join(dir, ".git", "refs", "heads", "main")
				data, err := os.ReadFile(ref)
				require.NoError(t, err)
				writeFile(t, filepath.Join(store, "main"), string(data))
				require.NoError(t, os.Remove(ref))
				symlink(t, filepath.Join(store, "main"), ref)
			},
			func(t *testing.T, dir, store, other string) {
				writeFile(t, filepath.Join(store, "main.new"), other+"\n")
				require.NoError(t, os.Rename(filepath.Join(store, "main.new"), filepath.Join(store, "main")))
			}},
		{"HEAD hard-linked elsewhere, written in place through the other name",
			func(t *testing.T, dir, store string) {
				require.NoError(t, os.Link(filepath.Join(dir, ".git", "HEAD"), filepath.Join(store, "head")))
			},
			func(t *testing.T, dir, store, other string) {
				f, err := os.OpenFile(filepath.Join(store, "head"), os.O_WRONLY|os.O_TRUNC, 0)
				require.NoError(t, err)
				_, err = f.WriteString(other + "\n")
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}},
		{".git a link to a Git directory elsewhere, an ancestor of it swapped",
			func(t *testing.T, dir, store string) {
				require.NoError(t, os.MkdirAll(filepath.Join(store, "a"), 0o755))
				require.NoError(t, os.Rename(filepath.Join(dir, ".git"), filepath.Join(store, "a", "repo.git")))
				symlink(t, filepath.Join(store, "a", "repo.git"), filepath.Join(dir, ".git"))
			},
			func(t *testing.T, dir, store, other string) {
				require.NoError(t, exec.Command("cp", "-a", filepath.Join(store, "a"), filepath.Join(store, "b")).Run())
				writeFile(t, filepath.Join(store, "b", "repo.git", "refs", "heads", "main"), other+"\n")
				require.NoError(t, os.Rename(filepath.Join(store, "a"), filepath.Join(store, "a.old")))
				require.NoError(t, os.Rename(filepath.Join(store, "b"), filepath.Join(store, "a")))
			}},
		{"a gitdir reached through two links, the second re-pointed",
			func(t *testing.T, dir, store string) {
				gitdirs, stage := filepath.Join(store, "gitdirs"), filepath.Join(store, "stage")
				require.NoError(t, os.MkdirAll(gitdirs, 0o755))
				require.NoError(t, os.MkdirAll(stage, 0o755))
				require.NoError(t, os.Rename(filepath.Join(dir, ".git"), filepath.Join(store, "rel1")))
				require.NoError(t, exec.Command("cp", "-a", filepath.Join(store, "rel1"), filepath.Join(store, "rel2")).Run())
				symlink(t, "../rel1", filepath.Join(stage, "live"))
				symlink(t, filepath.Join(stage, "live"), filepath.Join(gitdirs, "current"))
				writeFile(t, filepath.Join(dir, ".git"), "gitdir: "+filepath.Join(gitdirs, "current")+"\n")
			},
			func(t *testing.T, dir, store, other string) {
				writeFile(t, filepath.Join(store, "rel2", "refs", "heads", "main"), other+"\n")
				repoint(t, "../rel2", filepath.Join(store, "stage", "live"))
			}},
	}
	for _, mode := range pathModes {
		for _, tc := range cases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				tmp := tempDir(t)
				dir, store := filepath.Join(tmp, "agent"), filepath.Join(tmp, "store")
				require.NoError(t, os.MkdirAll(store, 0o755))
				module, first := agentRepo(t, dir)
				other := commit(t, dir, "lib.py", "x\n")
				writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "main"), first+"\n")
				tc.setup(t, dir, store)
				require.Equal(t, first, git(t, dir, "rev-parse", "HEAD"))
				g, err := newGuard(Options{ModulePath: module, HomeDir: tmp}, mode.env(t))
				require.NoError(t, err)
				for i := 0; i < 3; i++ {
					require.NoError(t, g.EnsureCurrent())
				}
				if mode.name == "watch" {
					require.True(t, onWatchPath(g))
				}
				tc.change(t, dir, store, other)
				require.Equal(t, other, git(t, dir, "rev-parse", "HEAD"), "git sees the change")
				var se *StaleError
				require.ErrorAs(t, g.EnsureCurrent(), &se)
				assert.Equal(t, other, se.Current)
			})
		}
	}
}

// A file bind-mounted over HEAD, then written in place at its source: on
// every path, the check after the write is stale. (Needs root.)
func TestWriteThroughAFileBindMount(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			tmp := tempDir(t)
			dir := filepath.Join(tmp, "agent")
			module, first := agentRepo(t, dir)
			other := commit(t, dir, "lib.py", "x\n")
			writeFile(t, filepath.Join(dir, ".git", "refs", "heads", "main"), first+"\n")
			src := filepath.Join(tmp, "head")
			writeFile(t, src, "ref: refs/heads/main\n")
			head := filepath.Join(dir, ".git", "HEAD")
			if out, err := gittest.Mount(t, "--bind", src, head); err != nil {
				t.Skipf("cannot bind-mount here (needs root and mount(8)): %v: %s", err, out)
			}
			g, err := newGuard(Options{ModulePath: module, HomeDir: tmp}, mode.env(t))
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				require.NoError(t, g.EnsureCurrent())
			}
			f, err := os.OpenFile(src, os.O_WRONLY|os.O_TRUNC, 0)
			require.NoError(t, err)
			_, err = f.WriteString(other + "\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.Equal(t, other, git(t, dir, "rev-parse", "HEAD"))
			assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		})
	}
}

// A file system mounted over the module's directory takes the module out
// of the worktree, as git stops at the mount point: the check is stale.
// (Needs root.)
func TestMountOverTheModulesDirectory(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			tmp := tempDir(t)
			dir := filepath.Join(tmp, "agent")
			initRepo(t, dir, map[string]string{"pkg/run_agent.py": "x = 1\n"})
			module := filepath.Join(dir, "pkg", "run_agent.py")
			g, err := newGuard(Options{ModulePath: module, HomeDir: tmp}, mode.env(t))
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				require.NoError(t, g.EnsureCurrent())
			}
			pkg := filepath.Join(dir, "pkg")
			if out, err := gittest.Mount(t, "-t", "tmpfs", "none", pkg); err != nil {
				t.Skipf("cannot mount here (needs root and mount(8)): %v: %s", err, out)
			}
			writeFile(t, module, "x = 2\n")
			_, _, _, ok := gitVerdict(t, module)
			require.False(t, ok, "git finds no repository across the mount point")
			assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
		})
	}
}

// With core.preferSymlinkRefs, git writes symbolic refs as symbolic links
// whose text is the target ref. The guard reads them as git does, for HEAD
// and for refs, loose and packed.
func TestSymbolicRefsStoredAsLinks(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"HEAD a link", func(t *testing.T, dir string) {
			git(t, dir, "symbolic-ref", "HEAD", "refs/heads/main")
		}},
		{"HEAD a link to a branch that is a link", func(t *testing.T, dir string) {
			git(t, dir, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
			git(t, dir, "symbolic-ref", "HEAD", "refs/heads/alias")
		}},
		{"HEAD a link, the branch packed", func(t *testing.T, dir string) {
			git(t, dir, "symbolic-ref", "HEAD", "refs/heads/main")
			git(t, dir, "pack-refs", "--all")
		}},
		{"HEAD a link to an alias link, the branch packed", func(t *testing.T, dir string) {
			git(t, dir, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
			git(t, dir, "symbolic-ref", "HEAD", "refs/heads/alias")
			git(t, dir, "pack-refs", "--all")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(tempDir(t), "agent")
			module, rev := agentRepo(t, dir)
			git(t, dir, "config", "core.preferSymlinkRefs", "true")
			tc.setup(t, dir)
			fi, err := os.Lstat(filepath.Join(dir, ".git", "HEAD"))
			require.NoError(t, err)
			require.Equal(t, os.ModeSymlink, fi.Mode().Type(), "git wrote HEAD as a link")
			require.Equal(t, rev, git(t, dir, "rev-parse", "HEAD"))

			for _, e := range []*env{settledEnv(), testEnv(nil)} {
				g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
				require.NoError(t, err)
				assert.Equal(t, rev, g.Identity().Revision, "the bound revision")
				require.NoError(t, checkWithin(t, g))
				require.NoError(t, checkWithin(t, g))
				defer func(g *Guard) {
					assert.ErrorIs(t, checkWithin(t, g), ErrStale, "after a commit")
				}(g)
			}
			c, err := gitread.Inspect(module)
			require.NoError(t, err)
			assert.Equal(t, rev, c.Revision, "Inspect")
			head, err := os.Readlink(filepath.Join(dir, ".git", "HEAD"))
			require.NoError(t, err)
			assert.Equal(t, head, c.Head, "Inspect: the ref HEAD names")
			commit(t, dir, "run_agent.py", "moved\n")
			require.NotEqual(t, rev, git(t, dir, "rev-parse", "HEAD"))
		})
	}
}

// A symbolic link at a ref path whose text is not a ref name is followed
// and read as a file, as git does; links that loop fail closed.
func TestRefLinksThatAreNotRefNames(t *testing.T) {
	dir := filepath.Join(tempDir(t), "agent")
	module, rev := agentRepo(t, dir)
	elsewhere := filepath.Join(tempDir(t), "main-ref")
	writeFile(t, elsewhere, rev+"\n")
	ref := filepath.Join(dir, ".git", "refs", "heads", "main")
	require.NoError(t, os.Remove(ref))
	symlink(t, elsewhere, ref)
	require.Equal(t, rev, git(t, dir, "rev-parse", "HEAD"))

	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, settledEnv())
	require.NoError(t, err)
	assert.Equal(t, rev, g.Identity().Revision)
	require.NoError(t, checkWithin(t, g))

	// The file the link leads to moves: so does HEAD.
	other := commit(t, dir, "lib.py", "z\n")
	require.Equal(t, other, git(t, dir, "rev-parse", "HEAD"))
	assert.ErrorIs(t, checkWithin(t, g), ErrStale)

	// HEAD as a link loop is no revision.
	head := filepath.Join(dir, ".git", "HEAD")
	require.NoError(t, os.Remove(head))
	symlink(t, "HEAD", head)
	assert.ErrorIs(t, checkWithin(t, g), ErrStale)
}

// sparseSize is the size a Git file is truncated to: a sparse file of
// zeros, which git refuses too.
const sparseSize = 256 << 20

// A sparse regular file at the index or packed-refs (truncated to 256
// MiB: zeros, or zeros after its content) makes every check stale, as git
// fails there too, and no check reads it whole: its ends say it cannot be
// one (no DIRC signature; a last line not terminated), so no check
// allocates near the
// bound of 64 MiB, and once the failure is settled a check stats the files
// it depends on and reads nothing.
//
// (An index grown with zeros after its content has no such tell: the
// first check after it changed reads it whole, later ones do not. Whether
// git refuses it depends on the bytes of its old checksum, which it then
// takes for an extension, so no case here relies on it.)
func TestSparseGitFileIsNotReadOnEveryCheck(t *testing.T) {
	for _, c := range []struct {
		name, layout, rel string
		zeros             bool     // truncated to 0 first: nothing but zeros
		git               []string // a git command that fails with it
	}{
		{"index of zeros", "loose", filepath.Join(".git", "index"), true, []string{"ls-files", "--error-unmatch", "run_agent.py"}},
		{"packed-refs of zeros", "packed", filepath.Join(".git", "packed-refs"), true, []string{"rev-parse", "HEAD"}},
		{"packed-refs grown with zeros", "packed", filepath.Join(".git", "packed-refs"), false, []string{"rev-parse", "HEAD"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, module := specialCheckout(t, c.layout)
			g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, settledEnv())
			require.NoError(t, err)
			require.NoError(t, g.EnsureCurrent())
			if c.zeros {
				require.NoError(t, os.Truncate(filepath.Join(dir, c.rel), 0))
			}
			require.NoError(t, os.Truncate(filepath.Join(dir, c.rel), sparseSize))
			out, err := gittest.Command(dir, c.git...).CombinedOutput()
			require.Error(t, err, "git %v answers with a sparse %s: %s", c.git, c.name, out)

			const checks = 20
			var first, most, total uint64
			for i := 0; i < checks; i++ {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
				runtime.ReadMemStats(&after)
				n := after.TotalAlloc - before.TotalAlloc
				if i == 0 {
					first = n
					continue
				}
				most, total = max(most, n), total+n
			}
			t.Logf("the first check allocated %d bytes; the %d after it %d at most, %d on average", first, checks-1, most, total/(checks-1))
			assert.Less(t, first, uint64(64<<20), "what the first check allocated")
			assert.Less(t, most, uint64(1<<20), "the most a later check allocated")
		})
	}
}

// needReftable skips the test, with the reason, where the git on PATH
// makes no reftable repository.
func needReftable(t *testing.T) {
	t.Helper()
	gittest.Need(t)
	if !gittest.HasReftable() {
		t.Skip("the git on PATH is older than 2.45 and makes no reftable repository; put a current one first (.ci/current-git.sh)")
	}
}

// manyBranches creates n branches at HEAD in one update-ref transaction.
func manyBranches(t *testing.T, dir string, n int) {
	t.Helper()
	var stdin strings.Builder
	for i := range n {
		fmt.Fprintf(&stdin, "create refs/heads/many/%05d HEAD\n", i)
	}
	cmd := gittest.Command(dir, "update-ref", "--stdin")
	cmd.Stdin = strings.NewReader(stdin.String())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "update-ref --stdin: %s", out)
}

// A reftable checkout, SHA-1 and SHA-256, the module in the main or in a
// linked worktree: bound to git's HEAD, and after each ref operation the
// guard agrees with git rev-parse HEAD in the module's directory, right
// after and on the next check, on every path (Options.Check "read", the stat path
// settled and not, the watch path). Each step says whether it moves HEAD,
// so that agreement is not reached by saying nothing.
func TestReftableAgainstGit(t *testing.T) {
	needReftable(t)
	modes := []struct {
		name       string
		env        func(t testing.TB) *env
		alwaysRead bool
	}{
		{"always-read", func(testing.TB) *env { return settledEnv() }, true},
	}
	for _, m := range pathModes {
		modes = append(modes, struct {
			name       string
			env        func(t testing.TB) *env
			alwaysRead bool
		}{m.name, m.env, false})
	}
	type repo struct{ main, in, first string }
	steps := []struct {
		name  string
		do    func(t *testing.T, r repo)
		moves bool
	}{
		{"commit", func(t *testing.T, r repo) { commit(t, r.in, "run_agent.py", "x = 2\n") }, true},
		{"branch", func(t *testing.T, r repo) { git(t, r.in, "branch", "topic") }, false},
		{"checkout of another branch at the same commit", func(t *testing.T, r repo) { git(t, r.in, "checkout", "-q", "topic") }, false},
		{"branch -m of HEAD's branch", func(t *testing.T, r repo) { git(t, r.in, "branch", "-m", "topic", "renamed") }, false},
		{"branch -D of another branch", func(t *testing.T, r repo) {
			git(t, r.in, "branch", "extra", r.first)
			git(t, r.in, "branch", "-D", "extra")
		}, false},
		{"symbolic-ref HEAD through another symbolic ref", func(t *testing.T, r repo) {
			git(t, r.in, "symbolic-ref", "refs/heads/alias", "refs/heads/renamed")
			git(t, r.in, "symbolic-ref", "HEAD", "refs/heads/alias")
		}, false},
		{"pack-refs --all", func(t *testing.T, r repo) { git(t, r.main, "pack-refs", "--all") }, false},
		{"gc", func(t *testing.T, r repo) { git(t, r.main, "gc", "-q", "--prune=now") }, false},
		{"thousands of refs, packed", func(t *testing.T, r repo) {
			manyBranches(t, r.main, 3000)
			git(t, r.main, "pack-refs", "--all")
		}, false},
		{"commit among them", func(t *testing.T, r repo) { commit(t, r.in, "run_agent.py", "x = 3\n") }, true},
		{"worktree add", func(t *testing.T, r repo) {
			git(t, r.main, "worktree", "add", "-q", "--detach", filepath.Join(filepath.Dir(r.main), "other"))
		}, false},
		{"checkout of another branch at another commit", func(t *testing.T, r repo) {
			git(t, r.in, "checkout", "-q", "-f", "-b", "older", r.first)
		}, true},
		{"detached HEAD at the same commit", func(t *testing.T, r repo) { git(t, r.in, "checkout", "-q", "--detach") }, false},
		{"checkout of a branch at another commit", func(t *testing.T, r repo) { git(t, r.in, "checkout", "-q", "-f", "renamed") }, true},
		{"the branch moved from the main worktree", func(t *testing.T, r repo) {
			git(t, r.main, "update-ref", "refs/heads/renamed", r.first)
		}, true},
		{"the branch deleted", func(t *testing.T, r repo) {
			git(t, r.main, "update-ref", "-d", "refs/heads/renamed")
		}, true},
	}
	for _, mode := range modes {
		for _, format := range []string{"sha1", "sha256"} {
			for _, linked := range []bool{false, true} {
				kind := "main"
				if linked {
					kind = "linked"
				}
				t.Run(mode.name+"/"+format+"/"+kind, func(t *testing.T) {
					t.Parallel()
					root := tempDir(t)
					r := repo{main: filepath.Join(root, "main")}
					r.first = initRepo(t, r.main, map[string]string{"run_agent.py": "x = 1\n"}, "--ref-format=reftable", "--object-format="+format)
					r.in = r.main
					if linked {
						r.in = filepath.Join(root, "wt")
						git(t, r.main, "worktree", "add", "-q", "-b", "wtbranch", r.in)
					}
					module := filepath.Join(r.in, "run_agent.py")
					bind := func() *Guard {
						g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t), Check: map[bool]string{true: "read"}[mode.alwaysRead]}, mode.env(t))
						require.NoError(t, err)
						require.Equal(t, git(t, r.in, "rev-parse", "HEAD"), g.Identity().Revision, "bound to git's HEAD")
						require.NoError(t, checkWithin(t, g))
						require.NoError(t, checkWithin(t, g), "the fast path before the change")
						if mode.name == "watch" {
							require.True(t, onWatchPath(g), "a reftable checkout is watched")
						}
						if mode.name == "stat-settled" {
							require.True(t, trusted(g), "the snapshot of a settled reftable checkout is trusted")
						}
						return g
					}
					g := bind()
					for _, s := range steps {
						bound := g.Identity().Revision
						s.do(t, r)
						for _, when := range []string{"right after", "on the next check"} {
							err := checkWithin(t, g)
							_, rev, tracked, ok := gitVerdict(t, module)
							gitCurrent := ok && rev == bound && tracked
							assert.Equal(t, gitCurrent, err == nil, "%s, %s: the guard says %v, git says HEAD %q (ok %v), tracked %v", s.name, when, err, rev, ok, tracked)
							assert.Equal(t, s.moves, err != nil, "%s, %s: stale %v", s.name, when, err)
						}
						if s.moves && s.name != "the branch deleted" {
							g = bind()
						}
					}
				})
			}
		}
	}
}

// Eight goroutines check while ref updates that leave HEAD alone, and
// compactions that replace the stack's tables under the reads, go on: no
// check fails. Then a commit: every check that begins after it returned
// fails. On every path.
func TestReftableChecksRaceCompaction(t *testing.T) {
	needReftable(t)
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			dir := tempDir(t)
			module := filepath.Join(dir, "run_agent.py")
			initRepo(t, dir, map[string]string{"run_agent.py": "x = 1\n"}, "--ref-format=reftable")
			manyBranches(t, dir, 300)
			g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, mode.env(t))
			require.NoError(t, err)
			require.NoError(t, g.EnsureCurrent())

			var committing, moved, checks atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						after := moved.Load()
						err := g.EnsureCurrent()
						began := committing.Load()
						checks.Add(1)
						if began == 0 && err != nil {
							t.Errorf("a check failed while HEAD stayed: %v", err)
							return
						}
						if after > 0 && err == nil {
							t.Error("a check that began after the commit returned passed")
							return
						}
					}
				}()
			}
			for i := range 12 {
				switch i % 3 {
				case 0:
					git(t, dir, "branch", fmt.Sprintf("b%d", i))
				case 1:
					git(t, dir, "branch", "-D", fmt.Sprintf("b%d", i-1))
				case 2:
					git(t, dir, "pack-refs", "--all")
				}
			}
			committing.Store(1)
			commit(t, dir, "run_agent.py", "x = 2\n")
			moved.Store(1)
			for checks.Load() < 100 {
				git(t, dir, "pack-refs", "--all")
			}
			close(stop)
			wg.Wait()
			assert.ErrorIs(t, g.EnsureCurrent(), ErrStale)
			t.Logf("%d checks", checks.Load())
		})
	}
}

// newWithin runs New in a goroutine and fails the test if it does not
// return within a few seconds.
func newWithin(t *testing.T, opts Options) (*Guard, error) {
	t.Helper()
	type result struct {
		g   *Guard
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := New(opts)
		done <- result{g, err}
	}()
	select {
	case r := <-done:
		return r.g, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("New did not return")
		return nil, nil
	}
}

// gitPaths are the files a read opens, for a checkout whose branch is loose
// or packed, and a linked worktree's.
type gitPath struct {
	name   string
	layout string // "loose", "packed" or "worktree"
	rel    func(dir string) string
}

var gitPaths = []gitPath{
	{"HEAD", "loose", func(dir string) string { return filepath.Join(dir, ".git", "HEAD") }},
	{"the branch's loose ref", "loose", func(dir string) string { return filepath.Join(dir, ".git", "refs", "heads", "main") }},
	{"index", "loose", func(dir string) string { return filepath.Join(dir, ".git", "index") }},
	{"config", "loose", func(dir string) string { return filepath.Join(dir, ".git", "config") }},
	{"packed-refs", "packed", func(dir string) string { return filepath.Join(dir, ".git", "packed-refs") }},
	{"a linked worktree's .git file", "worktree", func(dir string) string { return filepath.Join(dir+"-wt", ".git") }},
	{"a linked worktree's commondir", "worktree", func(dir string) string {
		return filepath.Join(dir, ".git", "worktrees", filepath.Base(dir)+"-wt", "commondir")
	}},
	{"a linked worktree's HEAD", "worktree", func(dir string) string {
		return filepath.Join(dir, ".git", "worktrees", filepath.Base(dir)+"-wt", "HEAD")
	}},
}

// specialCheckout makes a checkout in the given layout and returns its
// directory and the module path a guard binds to.
func specialCheckout(t *testing.T, layout string) (dir, module string) {
	t.Helper()
	dir = filepath.Join(tempDir(t), "agent")
	module, _ = agentRepo(t, dir)
	switch layout {
	case "packed":
		git(t, dir, "pack-refs", "--all")
	case "worktree":
		git(t, dir, "worktree", "add", "-q", dir+"-wt", "-b", "wt")
		module = filepath.Join(dir+"-wt", "run_agent.py")
	}
	return dir, module
}

// replaceWith puts a special file at path in place of what is there.
func replaceWith(t *testing.T, kind, path string) {
	t.Helper()
	require.NoError(t, os.Remove(path))
	switch kind {
	case "fifo":
		gittest.Mkfifo(t, path)
	case "socket":
		gittest.Mksocket(t, path)
	case "link to /dev/null":
		symlink(t, os.DevNull, path)
	case "link to /dev/zero":
		symlink(t, "/dev/zero", path)
	}
}

// A special file at any path a read opens is a read failure, at once: a
// bound guard fails closed, New returns an error naming the path, and once
// the file is restored the next check is current again. Nothing blocks.
//
// One place is the exception, as it is for git: a HEAD link whose text is
// no ref name means that no repository is there. New then binds an inert
// guard, and git finds no repository either. A .git that is neither a
// directory nor a regular file is passed over by git before 2.54 and
// fatal to later versions: a read failure, and no git gives an answer.
func TestSpecialFilesAtGitPaths(t *testing.T) {
	for _, p := range gitPaths {
		for _, kind := range []string{"fifo", "socket", "link to /dev/null", "link to /dev/zero"} {
			t.Run(p.name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				dir, module := specialCheckout(t, p.layout)
				path := p.rel(dir)
				saved, err := os.ReadFile(path)
				require.NoError(t, err)
				g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
				require.NoError(t, err)
				require.NoError(t, checkWithin(t, g))

				replaceWith(t, kind, path)
				start := time.Now()
				assert.ErrorIs(t, checkWithin(t, g), ErrStale)
				assert.ErrorIs(t, checkWithin(t, g), ErrStale, "the next check")
				g2, err := newWithin(t, Options{ModulePath: module, HomeDir: tempDir(t)})
				noRepository := kind != "fifo" && kind != "socket" && p.name == "HEAD"
				if p.name == "a linked worktree's .git file" {
					_, _, _, ok := gitVerdict(t, module)
					assert.False(t, ok, "git finds a repository with %s at %s", kind, path)
				}
				if noRepository {
					require.NoError(t, err, "New with %s at %s", kind, path)
					assert.Empty(t, g2.Identity().Revision, "New with %s at %s", kind, path)
					_, _, _, ok := gitVerdict(t, module)
					assert.False(t, ok, "git finds a repository with %s at %s", kind, path)
				} else {
					assert.ErrorContains(t, err, path, "New with %s at %s", kind, path)
				}
				assert.Less(t, time.Since(start), 5*time.Second, "two checks and a New took too long")

				require.NoError(t, os.Remove(path))
				require.NoError(t, os.WriteFile(path, saved, 0o644))
				assert.NoError(t, checkWithin(t, g), "the check after the file was restored")
			})
		}
	}
}

// packed-refs as a link to /dev/zero, a device that never ends, is refused
// without reading it: no allocation toward the size limit.
func TestEndlessPackedRefsIsNotRead(t *testing.T) {
	dir, module := specialCheckout(t, "packed")
	g, err := New(Options{ModulePath: module, HomeDir: tempDir(t)})
	require.NoError(t, err)
	replaceWith(t, "link to /dev/zero", filepath.Join(dir, ".git", "packed-refs"))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	assert.ErrorIs(t, checkWithin(t, g), ErrStale)
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "one check allocated %d bytes", after.TotalAlloc-before.TotalAlloc)
}

// deploy is a release layout as deploy tools make it: three checkouts of
// one history side by side, links that select one, and a module file
// linked from an application directory.
//
//	releases/v1      the checkout the server loaded (module in pkg/)
//	releases/v1b     a clone of v1 at the same revision
//	releases/v2      a clone of v1 one commit ahead
//	current       -> releases/v1
//	app/run_agent.py -> ../releases/v1/pkg/run_agent.py
type deploy struct {
	root, v1, v1b, v2 string
	first, rev, rev2  string // v1's first commit, its HEAD, v2's HEAD
}

func newDeploy(t *testing.T) *deploy {
	t.Helper()
	tmpl := deployTemplate(t)
	d := &deploy{root: tempDir(t), first: tmpl.first, rev: tmpl.rev, rev2: tmpl.rev2}
	// A copy of the template: the same histories, made with one process
	// instead of a dozen git commands per case.
	if out, err := exec.Command("cp", "-a", tmpl.root+"/.", d.root).CombinedOutput(); err != nil {
		t.Fatalf("copying the deploy template: %v: %s", err, out)
	}
	d.v1 = filepath.Join(d.root, "releases", "v1")
	d.v1b = filepath.Join(d.root, "releases", "v1b")
	d.v2 = filepath.Join(d.root, "releases", "v2")
	return d
}

var (
	deployOnce sync.Once
	deployTmpl *deploy
	deployErr  string
)

// deployTemplate makes the deploy layout once per run, in a directory
// TestMain removes; newDeploy copies it.
func deployTemplate(t *testing.T) *deploy {
	t.Helper()
	deployOnce.Do(func() {
		root, err := os.MkdirTemp("", "runtimeguard-deploy-")
		if err != nil {
			deployErr = err.Error()
			return
		}
		cleanups = append(cleanups, root)
		// The template is made by a test of its own so that a failure
		// is reported once, with git's output, and fails every case.
		ok := t.Run("deploy template", func(t *testing.T) {
			d := &deploy{root: root}
			d.v1 = filepath.Join(root, "releases", "v1")
			d.v1b = filepath.Join(root, "releases", "v1b")
			d.v2 = filepath.Join(root, "releases", "v2")
			d.first = initRepo(t, d.v1, map[string]string{"pkg/run_agent.py": "x = 1\n", "lib.py": "y\n"})
			d.rev = commit(t, d.v1, "lib.py", "y = 2\n")
			git(t, root, "clone", "-q", d.v1, d.v1b)
			git(t, root, "clone", "-q", d.v1, d.v2)
			d.rev2 = commit(t, d.v2, "pkg/run_agent.py", "x = 2\n")
			symlink(t, filepath.Join("releases", "v1"), filepath.Join(root, "current"))
			require.NoError(t, os.MkdirAll(filepath.Join(root, "app"), 0o755))
			symlink(t, filepath.Join("..", "releases", "v1", "pkg", "run_agent.py"), filepath.Join(root, "app", "run_agent.py"))
			deployTmpl = d
		})
		if !ok {
			deployErr = "the deploy template could not be made"
		}
	})
	if deployTmpl == nil {
		t.Fatal(deployErr)
	}
	return deployTmpl
}

// symlink makes a link at path whose text is target.
func symlink(t *testing.T, target, path string) {
	t.Helper()
	require.NoError(t, os.Symlink(target, path))
}

// repoint replaces the link at path atomically, as deploy tools do: a new
// link beside it, renamed over it.
func repoint(t *testing.T, target, path string) {
	t.Helper()
	tmp := path + ".new"
	symlink(t, target, tmp)
	require.NoError(t, os.Rename(tmp, path))
}

// swapDirs exchanges two directories with renames.
func swapDirs(t *testing.T, a, b string) {
	t.Helper()
	require.NoError(t, os.Rename(a, a+".swap"))
	require.NoError(t, os.Rename(b, a))
	require.NoError(t, os.Rename(a+".swap", b))
}

// gitVerdict is what git itself says of a configured module path: the
// revision of HEAD and whether the index tracks the module, both asked in
// the directory the module file is in once links are followed. ok is false
// when git cannot answer (no repository, an unreadable HEAD, a path that
// leads nowhere), or takes over ten seconds.
func gitVerdict(t *testing.T, configured string) (dir, rev string, tracked, ok bool) {
	t.Helper()
	module, err := filepath.EvalSymlinks(configured)
	if err != nil {
		// A deleted module file still names its place; anything else
		// that leads nowhere has no answer.
		fi, lerr := os.Lstat(configured)
		d, derr := filepath.EvalSymlinks(filepath.Dir(configured))
		if derr != nil || lerr == nil && fi.Mode()&os.ModeSymlink != 0 || !os.IsNotExist(lerr) {
			return "", "", false, false
		}
		module = filepath.Join(d, filepath.Base(configured))
	}
	dir = filepath.Dir(module)
	run := func(args ...string) (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = dir, gittest.Env
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	rev, ok = run("rev-parse", "--verify", "-q", "HEAD")
	if !ok {
		return dir, "", false, false
	}
	_, tracked = run("ls-files", "--error-unmatch", "--", filepath.Base(module))
	return dir, rev, tracked, true
}

// The sweep: bind, change the checkout or what the configured path leads
// to, and compare the guard with git right after the change and again on
// the next check, on the fast path (a settled clock), with the real clock,
// and with Options.Check "read". The guard may answer "current" only where git agrees
// that the module the path leads to is the bound one, at the bound revision,
// and tracked; "stale" where git agrees is allowed only for the cases
// marked failClosed, and each case says which answer it wants.
func TestSweepAgainstGit(t *testing.T) {
	type target int
	const (
		direct     target = iota // releases/v1/pkg/run_agent.py
		viaCurrent               // current/pkg/run_agent.py
		viaApp                   // app/run_agent.py
	)
	cases := []struct {
		name       string
		path       target
		change     func(t *testing.T, d *deploy)
		stale      bool
		failClosed bool // stale although git sees the same revision: the path leads elsewhere, or another supported git fails
	}{
		// Git operations.
		{"commit", direct, func(t *testing.T, d *deploy) { commit(t, d.v1, "pkg/run_agent.py", "x = 3\n") }, true, false},
		{"commit --amend", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "commit", "-q", "--amend", "-m", "amended") }, true, false},
		{"reset --hard", viaCurrent, func(t *testing.T, d *deploy) { git(t, d.v1, "reset", "-q", "--hard", d.first) }, true, false},
		{"checkout of another branch at another commit", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "checkout", "-q", "-b", "older", d.first)
		}, true, false},
		{"checkout of another branch at the same commit", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "checkout", "-q", "-b", "same")
		}, false, false},
		{"detach at the same commit", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "checkout", "-q", "--detach") }, false, false},
		{"gc", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "gc", "-q", "--prune=now") }, false, false},
		{"pack-refs --all", viaApp, func(t *testing.T, d *deploy) { git(t, d.v1, "pack-refs", "--all") }, false, false},
		{"branch renamed", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "branch", "-m", "main", "trunk") }, false, false},
		{"other refs created", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "branch", "topic", d.first)
			git(t, d.v1, "tag", "v1")
		}, false, false},
		{"fetch", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "fetch", "-q", d.v2, "main:refs/remotes/v2/main") }, false, false},
		{"pull --ff-only", viaCurrent, func(t *testing.T, d *deploy) { git(t, d.v1, "pull", "-q", "--ff-only", d.v2, "main") }, true, false},
		{"rm --cached of the module", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "rm", "-q", "--cached", "pkg/run_agent.py")
		}, true, false},
		{"module file deleted", direct, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Remove(filepath.Join(d.v1, "pkg", "run_agent.py")))
		}, false, false},
		{"config rewritten", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "config", "branch.main.remote", "origin") }, false, false},

		// Links re-pointed, deleted, re-made.
		{"current flipped to another revision", viaCurrent, func(t *testing.T, d *deploy) {
			repoint(t, filepath.Join("releases", "v2"), filepath.Join(d.root, "current"))
		}, true, false},
		{"current flipped to a clone at the same revision", viaCurrent, func(t *testing.T, d *deploy) {
			repoint(t, filepath.Join("releases", "v1b"), filepath.Join(d.root, "current"))
		}, true, true},
		{"current re-made to the same place", viaCurrent, func(t *testing.T, d *deploy) {
			repoint(t, filepath.Join("releases", "v1"), filepath.Join(d.root, "current"))
		}, false, false},
		{"current deleted", viaCurrent, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Remove(filepath.Join(d.root, "current")))
		}, true, false},
		{"current replaced by a directory of another revision", viaCurrent, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Remove(filepath.Join(d.root, "current")))
			require.NoError(t, os.Rename(d.v2, filepath.Join(d.root, "current")))
		}, true, false},
		{"module link flipped to another revision", viaApp, func(t *testing.T, d *deploy) {
			repoint(t, filepath.Join(d.v2, "pkg", "run_agent.py"), filepath.Join(d.root, "app", "run_agent.py"))
		}, true, false},
		{"module link flipped to a clone at the same revision", viaApp, func(t *testing.T, d *deploy) {
			repoint(t, filepath.Join(d.v1b, "pkg", "run_agent.py"), filepath.Join(d.root, "app", "run_agent.py"))
		}, true, true},
		{"module link deleted", viaApp, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Remove(filepath.Join(d.root, "app", "run_agent.py")))
		}, true, false},
		{"module link replaced by a regular file", viaApp, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Remove(filepath.Join(d.root, "app", "run_agent.py")))
			writeFile(t, filepath.Join(d.root, "app", "run_agent.py"), "x = 1\n")
		}, true, false},
		{"app directory replaced by a link to another revision", viaApp, func(t *testing.T, d *deploy) {
			app := filepath.Join(d.root, "app")
			require.NoError(t, os.Rename(app, app+".old"))
			symlink(t, filepath.Join(d.v2, "pkg"), app)
		}, true, false},

		// Directories between the worktree's top level and the module.
		{"pkg replaced by a link into another revision", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.Rename(pkg, pkg+".old"))
			symlink(t, filepath.Join(d.v2, "pkg"), pkg)
		}, true, false},
		{"pkg replaced by a link into a clone at the same revision", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.Rename(pkg, pkg+".old"))
			symlink(t, filepath.Join(d.v1b, "pkg"), pkg)
		}, true, true},
		{"pkg replaced by a copy of itself", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.Rename(pkg, pkg+".old"))
			writeFile(t, filepath.Join(pkg, "run_agent.py"), "x = 1\n")
		}, false, false},
		{"pkg removed", direct, func(t *testing.T, d *deploy) {
			require.NoError(t, os.RemoveAll(filepath.Join(d.v1, "pkg")))
		}, true, false},
		{"release directories swapped under current", viaCurrent, func(t *testing.T, d *deploy) {
			swapDirs(t, d.v1, d.v2)
		}, true, false},
		{"release directory swapped with a clone at the same revision", direct, func(t *testing.T, d *deploy) {
			swapDirs(t, d.v1, d.v1b)
		}, false, false},
		{"releases directory replaced by a link", viaCurrent, func(t *testing.T, d *deploy) {
			releases := filepath.Join(d.root, "releases")
			require.NoError(t, os.Rename(releases, releases+".old"))
			require.NoError(t, os.MkdirAll(releases+".new", 0o755))
			require.NoError(t, os.Rename(filepath.Join(releases+".old", "v2"), filepath.Join(releases+".new", "v1")))
			symlink(t, releases+".new", releases)
		}, true, false},

		// Special files where Git keeps its own: git before 2.54 passes
		// them over, later versions die ("not a regular file", "error
		// reading"), so no answer is current.
		{"a FIFO named .git in pkg", direct, func(t *testing.T, d *deploy) {
			gittest.Mkfifo(t, filepath.Join(d.v1, "pkg", ".git"))
		}, true, true},
		{"a socket named .git in pkg", direct, func(t *testing.T, d *deploy) {
			gittest.Mksocket(t, filepath.Join(d.v1, "pkg", ".git"))
		}, true, true},
		{"a link to /dev/null named .git in pkg", direct, func(t *testing.T, d *deploy) {
			symlink(t, os.DevNull, filepath.Join(d.v1, "pkg", ".git"))
		}, true, true},
		{"a link loop named .git in pkg", direct, func(t *testing.T, d *deploy) {
			symlink(t, ".git", filepath.Join(d.v1, "pkg", ".git"))
		}, true, true},
		{"a dangling link named .git in pkg", direct, func(t *testing.T, d *deploy) {
			symlink(t, "nowhere", filepath.Join(d.v1, "pkg", ".git"))
		}, false, false},

		// What makes a directory a Git directory to git: a valid HEAD,
		// objects and refs that pass access(2) for X_OK. A Git directory
		// that stops being one is passed over; a directory on the way to
		// the module that becomes one is a bare repository to git.
		{".git/objects moved away", direct, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Rename(filepath.Join(d.v1, ".git", "objects"), filepath.Join(d.root, "objects.moved")))
		}, true, false},
		{".git/refs moved away", direct, func(t *testing.T, d *deploy) {
			require.NoError(t, os.Rename(filepath.Join(d.v1, ".git", "refs"), filepath.Join(d.root, "refs.moved")))
		}, true, false},
		{".git/objects a file without execute permission", direct, func(t *testing.T, d *deploy) {
			objects := filepath.Join(d.v1, ".git", "objects")
			require.NoError(t, os.Rename(objects, filepath.Join(d.root, "objects.moved")))
			require.NoError(t, os.WriteFile(objects, nil, 0o644))
		}, true, false},
		{".git/objects an executable file", direct, func(t *testing.T, d *deploy) {
			objects := filepath.Join(d.v1, ".git", "objects")
			require.NoError(t, os.Rename(objects, filepath.Join(d.root, "objects.moved")))
			require.NoError(t, os.WriteFile(objects, nil, 0o755))
		}, false, false},
		{".git/refs a link to a directory", direct, func(t *testing.T, d *deploy) {
			refs := filepath.Join(d.v1, ".git", "refs")
			require.NoError(t, os.Rename(refs, filepath.Join(d.root, "refs.moved")))
			symlink(t, filepath.Join(d.root, "refs.moved"), refs)
		}, false, false},
		{"pkg made a bare repository", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "HEAD"), []byte(d.first+"\n"), 0o644))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "objects"), 0o755))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "refs"), 0o755))
		}, true, false},
		{"pkg holds HEAD, objects and refs, HEAD not valid", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "HEAD"), []byte("not a ref\n"), 0o644))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "objects"), 0o755))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "refs"), 0o755))
		}, false, false},
		{"pkg made a bare repository with executable files", direct, func(t *testing.T, d *deploy) {
			pkg := filepath.Join(d.v1, "pkg")
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "objects"), nil, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "refs"), nil, 0o755))
		}, true, false},
		{"refs/heads a file, the branch packed", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "pack-refs", "--all")
			heads := filepath.Join(d.v1, ".git", "refs", "heads")
			require.NoError(t, os.RemoveAll(heads))
			require.NoError(t, os.WriteFile(heads, nil, 0o644))
		}, true, false},
		{"refs an executable file, the branch packed", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "pack-refs", "--all")
			refs := filepath.Join(d.v1, ".git", "refs")
			require.NoError(t, os.RemoveAll(refs))
			require.NoError(t, os.WriteFile(refs, nil, 0o755))
		}, true, false},
		{"refs/heads removed, the branch packed", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "pack-refs", "--all")
			require.NoError(t, os.RemoveAll(filepath.Join(d.v1, ".git", "refs", "heads")))
		}, false, false},
		{"core.bare set", direct, func(t *testing.T, d *deploy) { git(t, d.v1, "config", "core.bare", "true") }, true, false},
		{"core.bare set in config.worktree", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "config", "extensions.worktreeConfig", "true")
			require.NoError(t, os.WriteFile(filepath.Join(d.v1, ".git", "config.worktree"), []byte("[core]\n\tbare = true\n"), 0o644))
		}, true, false},
		{"core.worktree set in config.worktree", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "config", "extensions.worktreeConfig", "true")
			require.NoError(t, os.WriteFile(filepath.Join(d.v1, ".git", "config.worktree"), []byte("[core]\n\tworktree = ../pkg\n"), 0o644))
		}, true, false},
		{"extensions.worktreeConfig set alone", direct, func(t *testing.T, d *deploy) {
			git(t, d.v1, "config", "extensions.worktreeConfig", "true")
		}, false, false},
		{"HEAD a link to /dev/null", direct, func(t *testing.T, d *deploy) {
			head := filepath.Join(d.v1, ".git", "HEAD")
			require.NoError(t, os.Remove(head))
			symlink(t, os.DevNull, head)
		}, true, false},
	}
	modes := []struct {
		name       string
		env        func(t testing.TB) *env
		alwaysRead bool
	}{
		{"always-read", func(testing.TB) *env { return settledEnv() }, true},
	}
	for _, m := range pathModes {
		modes = append(modes, struct {
			name       string
			env        func(t testing.TB) *env
			alwaysRead bool
		}{m.name, m.env, false})
	}
	t.Cleanup(func() { t.Logf("%d cases in %d modes compared with %s", len(cases), len(modes), gittest.Describe()) })
	for mi, mode := range modes {
		for ci, tc := range cases {
			if !onPath(ci, mi, len(modes)) {
				continue
			}
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				d := newDeploy(t)
				configured := map[target]string{
					direct:     filepath.Join(d.v1, "pkg", "run_agent.py"),
					viaCurrent: filepath.Join(d.root, "current", "pkg", "run_agent.py"),
					viaApp:     filepath.Join(d.root, "app", "run_agent.py"),
				}[tc.path]
				g, err := newGuard(Options{ModulePath: configured, HomeDir: tempDir(t), Check: map[bool]string{true: "read"}[mode.alwaysRead]}, mode.env(t))
				require.NoError(t, err)
				require.Equal(t, d.rev, g.Identity().Revision)
				require.NoError(t, checkWithin(t, g))
				require.NoError(t, checkWithin(t, g), "the fast path before the change")
				if mode.name == "watch" {
					require.True(t, onWatchPath(g), "the sweep's checkout is watched")
				}
				bound := g.Identity().ModulePath

				tc.change(t, d)
				for i, when := range []string{"right after the change", "on the next check"} {
					err := checkWithin(t, g)
					if tc.stale {
						assert.ErrorIs(t, err, ErrStale, "%s", when)
					} else {
						assert.NoError(t, err, "%s", when)
					}
					if i > 0 {
						continue
					}
					dir, rev, tracked, ok := gitVerdict(t, configured)
					gitCurrent := ok && rev == d.rev && tracked && filepath.Join(dir, filepath.Base(bound)) == bound
					if err == nil {
						assert.True(t, gitCurrent, "the guard says current, git says: dir %s, HEAD %q (ok %v), tracked %v", dir, rev, ok, tracked)
					} else if gitCurrent {
						assert.True(t, tc.failClosed, "the guard says stale where git agrees: %v", err)
					}
				}
			})
		}
	}
}

// A directory on the way to the module that holds HEAD, objects and refs
// but no valid HEAD is passed over, as git passes over it; once its HEAD is
// rewritten in place to a valid one (no rename, no new entry in the
// directory), git takes it for a bare repository, and so does every check.
func TestBareSignatureRewrittenInPlace(t *testing.T) {
	for _, m := range pathModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			d := newDeploy(t)
			pkg := filepath.Join(d.v1, "pkg")
			head := filepath.Join(pkg, "HEAD")
			require.NoError(t, os.WriteFile(head, []byte("not a ref, not yet\n"), 0o644))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "objects"), 0o755))
			require.NoError(t, os.Mkdir(filepath.Join(pkg, "refs"), 0o755))
			module := filepath.Join(pkg, "run_agent.py")
			_, rev, tracked, ok := gitVerdict(t, module)
			require.True(t, ok && tracked && rev == d.rev, "git passes over pkg")

			g := bindFast(t, module, m.env(t))
			require.Equal(t, d.rev, g.Identity().Revision)
			require.NoError(t, checkWithin(t, g))
			f, err := os.OpenFile(head, os.O_WRONLY|os.O_TRUNC, 0)
			require.NoError(t, err)
			_, err = f.WriteString("ref: refs/heads/main\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())

			_, _, tracked, _ = gitVerdict(t, module)
			require.False(t, tracked, "git takes pkg for a bare repository")
			assert.ErrorIs(t, checkWithin(t, g), ErrStale)
		})
	}
}

// A configured path with ".." after a link leads where the kernel (and the
// interpreter that loads the module) takes it: to the parent of the link's
// target, not of the link. The guard binds to that module, and sees its
// checkout move, and the link re-pointed.
func TestDotDotAfterALink(t *testing.T) {
	for _, m := range pathModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			root := tempDir(t)
			a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
			initRepo(t, a, map[string]string{"pkg/run_agent.py": "x = 'a'\n", "pkg/sub/keep": ""})
			revB := initRepo(t, b, map[string]string{"pkg/run_agent.py": "x = 'b'\n", "pkg/sub/keep": ""})
			symlink(t, filepath.Join(b, "pkg", "sub"), filepath.Join(a, "pkg", "l"))
			configured := a + "/pkg/l/../run_agent.py" // not cleaned: Join would
			data, err := os.ReadFile(configured)
			require.NoError(t, err)
			require.Equal(t, "x = 'b'\n", string(data), "the kernel reads b's module")

			g := bindFast(t, configured, m.env(t))
			assert.Equal(t, revB, g.Identity().Revision)
			assert.Equal(t, resolved(t, filepath.Join(b, "pkg", "run_agent.py")), g.Identity().ModulePath)
			require.NoError(t, checkWithin(t, g))
			commit(t, b, "pkg/run_agent.py", "x = 'b2'\n")
			assert.ErrorIs(t, checkWithin(t, g), ErrStale, "b moved")

			g = bindFast(t, configured, m.env(t))
			require.NoError(t, checkWithin(t, g))
			repoint(t, filepath.Join(a, "pkg", "sub"), filepath.Join(a, "pkg", "l"))
			assert.ErrorIs(t, checkWithin(t, g), ErrStale, "the link now leads into a")
		})
	}
}

// Release directories behind a link (Capistrano-style deploys, rsync into
// releases/<n>/ and a flip of current): a check of the install bound
// through current/run_agent.py is stale once the link leads to another
// release, whatever its stamp names, and current again once it leads back;
// on every check path.
func TestInstallReleaseLinks(t *testing.T) {
	root := func(module string) string { return filepath.Dir(filepath.Dir(module)) } // module: root/current/run_agent.py
	flipTo := func(t *testing.T, module, release, build string) {
		r := root(module)
		if _, err := os.Stat(filepath.Join(r, "releases", release)); err != nil {
			gittest.Release(t, r, release, build)
		}
		gittest.Flip(t, filepath.Join(r, "current"), filepath.Join("releases", release))
	}
	cases := []installCase{
		{name: "current flipped to another release", build: buildA, change: func(t *testing.T, module string) {
			flipTo(t, module, "2", buildB)
		}, stale: true, why: "now leads to"},
		{name: "current flipped to another release of the same build", build: buildA, change: func(t *testing.T, module string) {
			flipTo(t, module, "2", buildA)
		}, stale: true, why: "now leads to"},
		{name: "current flipped to another release of files alone", change: func(t *testing.T, module string) {
			flipTo(t, module, "2", "")
		}, stale: true, why: "now leads to"},
		{name: "current flipped away and back", build: buildA, change: func(t *testing.T, module string) {
			flipTo(t, module, "2", buildB)
			flipTo(t, module, "1", buildA)
		}},
		{name: "current flipped anew to the same release", build: buildA, change: func(t *testing.T, module string) {
			flipTo(t, module, "1", buildA)
		}},
		{name: "the release renamed away and another put in its place", build: buildA, change: func(t *testing.T, module string) {
			r := root(module)
			require.NoError(t, os.Rename(filepath.Join(r, "releases", "1"), filepath.Join(r, "releases", "1.old")))
			gittest.Release(t, r, "1", buildA)
		}, stale: true, why: "another file"},
		{name: "the release removed", build: buildA, change: func(t *testing.T, module string) {
			require.NoError(t, os.RemoveAll(filepath.Join(root(module), "releases", "1")))
		}, stale: true},
		{name: "the module made a link to another file", build: buildA, change: func(t *testing.T, module string) {
			dir := filepath.Join(root(module), "releases", "1")
			writeFile(t, filepath.Join(dir, "other.py"), "class AIAgent: pass\n")
			gittest.Flip(t, filepath.Join(dir, "run_agent.py"), "other.py")
		}, stale: true, why: "now leads to"},
		{name: "a file renamed over the module in the release", build: buildA, change: func(t *testing.T, module string) {
			gittest.Replace(t, filepath.Join(root(module), "releases", "1", "run_agent.py"), "class AIAgent: pass\n")
		}, stale: true, why: "another file"},
		{name: "the stamp of the release naming another build", build: buildA, change: func(t *testing.T, module string) {
			gittest.Replace(t, filepath.Join(root(module), "releases", "1", gittest.StampFile), gittest.Stamp(buildB, nil))
		}, stale: true, current: buildB},
		{name: "another release made beside, current untouched", build: buildA, change: func(t *testing.T, module string) {
			gittest.Release(t, root(module), "2", buildB)
		}},
	}
	runInstallCases(t, cases, func(t *testing.T, build string) (string, string) {
		r := filepath.Join(tempDir(t), "srv")
		gittest.Release(t, r, "1", build)
		require.NoError(t, os.Symlink(filepath.Join("releases", "1"), filepath.Join(r, "current")))
		module := filepath.Join(r, "current", "run_agent.py")
		return module, module
	})
}

// releaseInstall makes root/releases/1, an install whose stamp names
// build, behind root/current, and returns the module through the link.
func releaseInstall(t *testing.T, root, build string) string {
	t.Helper()
	gittest.Release(t, root, "1", build)
	gittest.Flip(t, filepath.Join(root, "current"), filepath.Join("releases", "1"))
	return filepath.Join(root, "current", "run_agent.py")
}

// A move of an install without Git proves nothing by itself: not a flip
// to another release, not even with a success receipt written since for
// the build the new release's stamp names. The plan is refused for good
// (not "not yet"), and a Reloader leaves the guard's own message, the
// manual 409, and never restarts.
func TestInstallMoveProvesNoReload(t *testing.T) {
	tmp := tempDir(t)
	root, home := filepath.Join(tmp, "srv"), filepath.Join(tmp, "home")
	module := releaseInstall(t, root, buildA)
	require.NoError(t, os.MkdirAll(home, 0o755))
	g, err := New(Options{ModulePath: module, HomeDir: home, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer g.Close()
	var restarts atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	rl, err := NewReloader(ctx, g, ReloaderOptions{
		ProofInterval: 5 * time.Millisecond,
		Restart:       func(context.Context, *Plan) error { restarts.Add(1); return nil },
	})
	require.NoError(t, err)
	defer func() { cancel(); <-rl.Done() }()

	gittest.Release(t, root, "2", buildB)
	writeFile(t, filepath.Join(home, filepath.FromSlash(HermesLayout.Receipt)), receipt("success", buildA, buildB, time.Now().Add(time.Second)))
	gittest.Flip(t, filepath.Join(root, "current"), filepath.Join("releases", "2"))
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	_, err = g.PlanReload(context.Background())
	require.ErrorIs(t, err, ErrNotReady)
	assert.False(t, isPending(err), "refused for good, not for now: %v", err)
	assert.ErrorContains(t, err, "install without Git")

	require.Eventually(t, func() bool {
		err := g.EnsureCurrent()
		return errors.As(err, &se) && se.Message == defaultMessage
	}, 10*time.Second, time.Millisecond, "the Reloader gives the manual 409 back")
	assert.False(t, se.RestartScheduled)
	assert.Equal(t, int32(0), restarts.Load())
	assert.Equal(t, uint64(0), g.Stats().Reloads)
}

// git-sync's layout proves a reload by the flip of its link, whatever the
// code bound before was: a guard bound to a module its worktree does not
// track (bound without Git, by the file) reloads once git-sync flips the
// link to a worktree of the revision it is named after.
func TestGitSyncFlipProvesAReloadOfAnInstallWithoutGit(t *testing.T) {
	c := newGitSyncCase(t)
	wt := filepath.Join(c.root, ".worktrees", c.revs[0])
	writeFile(t, filepath.Join(wt, "plugin.py"), "PLUGIN = 1\n") // not tracked
	g, err := New(Options{ModulePath: filepath.Join(c.link, "plugin.py"), Layout: GitSyncLayout(c.link), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer g.Close()
	require.Equal(t, "file", g.Observe().IdentifiedBy)

	commit(t, c.upstream, "plugin.py", "PLUGIN = 2\n")
	rev := git(t, c.upstream, "rev-parse", "HEAD")
	git(t, c.root, "fetch", "-q", c.upstream, "main")
	c.flip(t, c.worktree(t, rev, rev))
	require.ErrorIs(t, g.EnsureCurrent(), ErrStale)
	r, err := g.PlanReload(context.Background())
	require.NoError(t, err)
	defer r.Release()
	assert.Empty(t, r.From)
	assert.Equal(t, rev, r.To)
	require.NoError(t, r.Bind(context.Background()))
	assert.Equal(t, rev, g.Identity().Revision)
	assert.Equal(t, "git", g.Observe().IdentifiedBy)
	assert.NoError(t, g.EnsureCurrent())
}

// A link on a path Git keeps in its own files, followed by "..", is a
// dependency like a link on the module path: re-pointed to a place whose
// parent holds another Git directory, it moves the checkout, and the next
// check on every path says stale, as git, which now reads the other
// repository, names another revision.
func TestLinkInAGitFileRepointed(t *testing.T) {
	for _, mode := range pathModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			root := tempDir(t)
			// Two Git directories, far1/real.git and far2/real.git, of
			// checkouts of the same file at two revisions.
			var revs [2]string
			for i, far := range []string{"far1", "far2"} {
				src := filepath.Join(root, "src-"+far)
				revs[i] = initRepo(t, src, map[string]string{"run_agent.py": far + "\n"})
				require.NoError(t, os.MkdirAll(filepath.Join(root, far, "sub"), 0o755))
				require.NoError(t, os.Rename(filepath.Join(src, ".git"), filepath.Join(root, far, "real.git")))
			}
			wt := filepath.Join(root, "wt")
			writeFile(t, filepath.Join(wt, "run_agent.py"), "x\n")
			symlink(t, filepath.Join(root, "far1", "sub"), filepath.Join(wt, "lnk"))
			writeFile(t, filepath.Join(wt, ".git"), "gitdir: lnk/../real.git\n")
			module := filepath.Join(wt, "run_agent.py")

			g := bindFast(t, module, mode.env(t))
			require.Equal(t, revs[0], g.Identity().Revision)
			require.Equal(t, revs[0], git(t, wt, "rev-parse", "HEAD"))
			require.NoError(t, checkWithin(t, g), "the fast path before the change")

			tmp := filepath.Join(wt, "lnk.new")
			symlink(t, filepath.Join(root, "far2", "sub"), tmp)
			require.NoError(t, os.Rename(tmp, filepath.Join(wt, "lnk")))
			require.Equal(t, revs[1], git(t, wt, "rev-parse", "HEAD"), "git reads the other repository")
			for _, when := range []string{"right after the change", "on the next check"} {
				assert.ErrorIs(t, checkWithin(t, g), ErrStale, "%s", when)
			}
		})
	}
}

// TestCICheckoutIgnoresUsersGitConfig: the checkout the Windows CI makes
// (.ci/test-checkout.sh) is made whatever the user's Git configuration
// says: a global, XDG or environment config that signs commits with a
// program that fails, runs a failing hook, or copies one from a template
// changes nothing.
func TestCICheckoutIgnoresUsersGitConfig(t *testing.T) {
	gittest.Need(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	home := gittest.TempDir(t)
	hooks := filepath.Join(home, "hooks")
	gittest.WriteFile(t, filepath.Join(hooks, "pre-commit"), "#!/bin/sh\necho hook ran >&2\nexit 1\n")
	gittest.WriteFile(t, filepath.Join(home, "templates", "hooks", "pre-commit"), "#!/bin/sh\necho template hook ran >&2\nexit 1\n")
	require.NoError(t, os.Chmod(filepath.Join(hooks, "pre-commit"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(home, "templates", "hooks", "pre-commit"), 0o755))
	hostile := "[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = false\n[user]\n\tsigningKey = nobody\n" +
		"[core]\n\thooksPath = " + hooks + "\n[init]\n\ttemplateDir = " + filepath.Join(home, "templates") + "\n"
	gittest.WriteFile(t, filepath.Join(home, ".gitconfig"), hostile)
	gittest.WriteFile(t, filepath.Join(home, "xdg", "git", "config"), hostile)

	dir := filepath.Join(gittest.TempDir(t), "agent")
	cmd := exec.Command("bash", filepath.Join(".ci", "test-checkout.sh"), dir)
	cmd.Env = append(os.Environ(),
		"HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "xdg"),
		"GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=commit.gpgSign", "GIT_CONFIG_VALUE_0=true",
		"GIT_CONFIG_PARAMETERS='commit.gpgsign'='true'")
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "test-checkout.sh: %s", stderr)
	rev := strings.TrimSpace(string(out))
	assert.Equal(t, gittest.Git(t, dir, "rev-parse", "--verify", "HEAD"), rev)
	assert.NotContains(t, gittest.Git(t, dir, "cat-file", "commit", "HEAD"), "gpgsig", "the commit is not signed")
	gittest.Git(t, dir, "--literal-pathspecs", "ls-files", "--error-unmatch", "run_agent.py")
	got, err := inspectRevision(filepath.Join(dir, "run_agent.py"))
	require.NoError(t, err)
	assert.Equal(t, rev, got)
}

// readBenchDirs are the checkouts of BenchmarkReadAfterChange, one per
// size, made once per run (the largest takes a while) in a directory
// TestMain removes.
var (
	readBenchMu   sync.Mutex
	readBenchRoot string
	readBenchDirs = map[int]string{}
)

// readBenchCheckout returns a checkout of files tracked files (and ten
// packed tags), made on the first call for that size.
func readBenchCheckout(b *testing.B, files int) string {
	b.Helper()
	readBenchMu.Lock()
	defer readBenchMu.Unlock()
	if dir, ok := readBenchDirs[files]; ok {
		return dir
	}
	if readBenchRoot == "" {
		root, err := os.MkdirTemp("", "runtimeguard-readbench-")
		if err != nil {
			b.Fatal(err)
		}
		cleanups = append(cleanups, root)
		readBenchRoot = root
	}
	dir := filepath.Join(readBenchRoot, fmt.Sprint(files))
	makeCheckout(b, dir, files, 10)
	readBenchDirs[files] = dir
	return dir
}

// BenchmarkReadAfterChange is the guard's check after a change, which
// reads the checkout again (on the stat path, its files settled, so that
// every change is seen by a stat; the handoff to the reading goroutine
// included), at 1,000, 100,000 and 500,000 tracked files (the largest
// not under -short):
//
//   - ref-only: packed-refs rewritten with the same content (a new file,
//     as pack-refs writes it): HEAD's revision and the index unchanged;
//   - index: the index's timestamps changed (as a refresh that rewrites
//     it leaves it), its content the same: it is read whole;
//   - git: git rev-parse HEAD and git ls-files --error-unmatch of the
//     module on the same checkout, the answer from git, in two processes.
//
// Beside time and allocations it reports heap-peak-B, the bytes one check
// allocates with the collector off (so the most its heap can grow by
// while it reads), index-B, the size of the index, and for git,
// git-maxrss-KB, the larger resident peak of its two processes.
func BenchmarkReadAfterChange(b *testing.B) {
	for _, files := range []int{1000, 100000, 500000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			if files > 100000 && testing.Short() {
				b.Skip("the largest checkout is not made under -short")
			}
			dir := readBenchCheckout(b, files)
			module := filepath.Join(dir, "run_agent.py")
			index := filepath.Join(dir, ".git", "index")
			packed := filepath.Join(dir, ".git", "packed-refs")
			fi, err := os.Stat(index)
			if err != nil {
				b.Fatal(err)
			}
			refOnly := func(i int) {
				data, err := os.ReadFile(packed)
				if err != nil {
					b.Fatal(err)
				}
				writeFile(b, packed+".new", string(data))
				if err := os.Rename(packed+".new", packed); err != nil {
					b.Fatal(err)
				}
			}
			base := time.Now().Add(-time.Hour)
			indexChange := func(i int) {
				at := base.Add(time.Duration(i+1) * time.Millisecond)
				if err := os.Chtimes(index, at, at); err != nil {
					b.Fatal(err)
				}
			}
			for _, tc := range []struct {
				name   string
				change func(i int)
			}{{"ref-only", refOnly}, {"index", indexChange}} {
				b.Run(tc.name, func(b *testing.B) {
					g := settledGuard(b, module)
					check := func(i int) {
						tc.change(i)
						if err := g.EnsureCurrent(); err != nil {
							b.Fatal(err)
						}
					}
					check(-1) // the first read after binding
					reads := g.Stats().FullReads
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						tc.change(i)
						b.StartTimer()
						if err := g.EnsureCurrent(); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					if got := g.Stats().FullReads - reads; got != uint64(b.N) {
						b.Fatalf("%d checks made %d full reads", b.N, got)
					}
					b.ReportMetric(float64(heapPeak(func() { check(b.N) })), "heap-peak-B")
					b.ReportMetric(float64(fi.Size()), "index-B")
				})
			}
			b.Run("git", func(b *testing.B) {
				var rss int64
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					for _, args := range [][]string{
						{"rev-parse", "--verify", "HEAD"},
						{"--literal-pathspecs", "ls-files", "--error-unmatch", "--", "run_agent.py"},
					} {
						cmd := gittest.Command(dir, args...)
						if out, err := cmd.CombinedOutput(); err != nil {
							b.Fatalf("git %v: %v: %s", args, err, out)
						}
						if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
							rss = max(rss, int64(ru.Maxrss))
						}
					}
				}
				if runtime.GOOS == "linux" { // ru_maxrss in KiB
					b.ReportMetric(float64(rss), "git-maxrss-KB")
				}
				b.ReportMetric(float64(fi.Size()), "index-B")
			})
		})
	}
}

// heapPeak runs fn with the collector off and returns the bytes it
// allocated: nothing is freed meanwhile, so it is the most the heap can
// have grown by at any moment of fn.
func heapPeak(fn func()) uint64 {
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// benchCheckout is a checkout of benchFiles tracked files and benchRefs
// packed refs, made once per run, in four layouts, and a fifth where git
// makes reftable repositories:
//
//   - packed: the branch lives in packed-refs;
//   - loose: a copy whose branch ref file is written after packing;
//   - symlinked: the loose copy reached through a symbolic link
//     (current -> loose), with the module two directories below the top
//     level;
//   - linked: a linked worktree of the loose copy (git worktree add), its
//     HEAD and index in the main repository's worktrees directory;
//   - reftable: the same files and refs in a reftable repository, its
//     stack compacted into one table, then one commit on top (two tables).
type benchCheckout struct {
	root, packed, loose string
	// modules maps each layout to the module path a guard is bound to.
	modules map[string]string
}

// benchLayoutNames are the layouts, in the order benchmarks run them.
var benchLayoutNames = []string{"loose", "packed", "symlinked", "linked", "reftable"}

const (
	benchFiles = 20000
	benchRefs  = 5000
)

var (
	benchOnce sync.Once
	benchRepo benchCheckout
	benchErr  error
)

// makeCheckout builds a repository whose index tracks files entries (all
// naming one blob, so no file has to be written) plus run_agent.py, with
// refs tags packed into packed-refs (or compacted into one table).
// initArgs go to git init.
func makeCheckout(tb testing.TB, dir string, files, refs int, initArgs ...string) {
	tb.Helper()
	module := filepath.Join(dir, "run_agent.py")
	writeFile(tb, module, "class AIAgent: pass\n")
	git(tb, dir, append([]string{"init", "-q"}, initArgs...)...)
	blob := git(tb, dir, "hash-object", "-w", "run_agent.py")
	var in bytes.Buffer
	for i := 0; i < files; i++ {
		fmt.Fprintf(&in, "100644 %s 0\tsrc/pkg%03d/module_%05d.py\n", blob, i%500, i)
	}
	fmt.Fprintf(&in, "100644 %s 0\trun_agent.py\n", blob)
	runGitStdin(tb, dir, &in, "update-index", "--index-info")
	git(tb, dir, "commit", "-q", "-m", "many files")
	head := git(tb, dir, "rev-parse", "HEAD")
	in.Reset()
	for i := 0; i < refs; i++ {
		fmt.Fprintf(&in, "create refs/tags/t%05d %s\n", i, head)
	}
	runGitStdin(tb, dir, &in, "update-ref", "--stdin")
	git(tb, dir, "pack-refs", "--all")
}

func runGitStdin(tb testing.TB, dir string, stdin *bytes.Buffer, args ...string) {
	tb.Helper()
	cmd := gittest.Command(dir, args...)
	cmd.Stdin = stdin
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func benchSetup(b *testing.B) benchCheckout {
	b.Helper()
	benchOnce.Do(func() {
		root, err := os.MkdirTemp("", "runtimeguard-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchRepo = benchCheckout{root: root, packed: filepath.Join(root, "packed"), loose: filepath.Join(root, "loose")}
		cleanups = append(cleanups, root)
		makeCheckout(b, benchRepo.packed, benchFiles, benchRefs)
		if out, err := exec.Command("cp", "-a", benchRepo.packed, benchRepo.loose).CombinedOutput(); err != nil {
			benchErr = fmt.Errorf("cp: %v: %s", err, out)
			return
		}
		// git update-ref does not write a ref whose value is unchanged:
		// write the loose ref file itself, as git does, over the packed one.
		head := git(b, benchRepo.loose, "rev-parse", "HEAD")
		writeFile(b, filepath.Join(benchRepo.loose, ".git", "refs", "heads", "main"), head+"\n")
		nested := filepath.Join(benchRepo.loose, "src", "pkg000", "module_00000.py")
		writeFile(b, nested, "class AIAgent: pass\n")
		if err := os.Symlink("loose", filepath.Join(root, "current")); err != nil {
			benchErr = err
			return
		}
		worktree := filepath.Join(root, "worktree")
		git(b, benchRepo.loose, "worktree", "add", "-q", "-b", "worktree", worktree)
		benchRepo.modules = map[string]string{
			"packed":    filepath.Join(benchRepo.packed, "run_agent.py"),
			"loose":     filepath.Join(benchRepo.loose, "run_agent.py"),
			"symlinked": filepath.Join(root, "current", "src", "pkg000", "module_00000.py"),
			"linked":    filepath.Join(worktree, "run_agent.py"),
		}
		if gittest.HasReftable() {
			dir := filepath.Join(root, "reftable")
			makeCheckout(b, dir, benchFiles, benchRefs, "--ref-format=reftable")
			git(b, dir, "commit", "-q", "--allow-empty", "-m", "on top")
			benchRepo.modules["reftable"] = filepath.Join(dir, "run_agent.py")
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchRepo
}

// benchLayouts runs fn for each layout with the module path a guard binds
// to there, and logs what the figures depend on: the layout, the files
// and refs, the git that made them.
func benchLayouts(b *testing.B, fn func(b *testing.B, module string)) {
	repo := benchSetup(b)
	for _, layout := range benchLayoutNames {
		if module, ok := repo.modules[layout]; ok {
			b.Run(layout, func(b *testing.B) {
				b.Logf("%s layout, module %s: %d tracked files, %d packed refs, made by %s", layout, module, benchFiles+1, benchRefs, gittest.Describe())
				fn(b, module)
			})
		}
	}
}

// settledGuard binds to module and proves its snapshot is trusted: the
// bench checkout was just written, so its clock runs an hour ahead. It
// logs the files the answer depends on: what a check stats.
func settledGuard(b *testing.B, module string) *Guard {
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(b)}, settledEnv())
	if err != nil {
		b.Fatal(err)
	}
	if err := g.EnsureCurrent(); err != nil {
		b.Fatal(err)
	}
	if !trusted(g) {
		b.Fatal("snapshot not trusted")
	}
	return g
}

// depList describes a guard's dependencies, one per line.
func depList(g *Guard) string {
	var sb strings.Builder
	for _, d := range g.bound.Load().snap.Load().Deps {
		op := "stat "
		if d.NoFollow {
			op = "lstat"
		}
		state := "present"
		if !d.Stamp.Present() {
			state = "absent"
		}
		fmt.Fprintf(&sb, "\n  %s %s (%s)", op, d.Path, state)
	}
	return sb.String()
}

// BenchmarkEnsureCurrent is a check of an unchanged checkout.
func BenchmarkEnsureCurrent(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		g := settledGuard(b, module)
		b.Logf("a check stats:%s", depList(g))
		benchChecks(b, g)
	})
}

// BenchmarkEnsureCurrentParallel is the same from GOMAXPROCS goroutines.
func BenchmarkEnsureCurrentParallel(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		benchChecksParallel(b, settledGuard(b, module))
	})
}

// benchChecks times b.N checks of g, which must all pass, and reports
// the path they took and the full reads among them.
func benchChecks(b *testing.B, g *Guard) {
	defer reportChecks(b, g)()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := g.EnsureCurrent(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchChecksParallel is benchChecks from GOMAXPROCS goroutines.
func benchChecksParallel(b *testing.B, g *Guard) {
	defer reportChecks(b, g)()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.EnsureCurrent(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// reportChecks returns what reports, once b's loop ran, the full reads per
// check of g (the metric fullreads/op) and the path its checks take.
func reportChecks(b *testing.B, g *Guard) func() {
	before := g.Stats().FullReads
	return func() {
		b.StopTimer()
		b.ReportMetric(float64(g.Stats().FullReads-before)/float64(b.N), "fullreads/op")
		o := g.Observe()
		b.Logf("GOMAXPROCS %d; checks take the %s path%s", runtime.GOMAXPROCS(0), o.Check, map[bool]string{true: " (" + o.CheckReason + ")"}[o.CheckReason != ""])
	}
}

// BenchmarkStatFloor is one stat (or lstat) by path of each file the
// answer depends on, the list a bound guard keeps (logged by
// BenchmarkEnsureCurrent): HEAD, commondir (absent), the Git directory's
// objects and refs, the config, the index, the branch's loose ref (absent
// when packed), packed-refs when the branch lives there, for the
// symlinked layout the link and the directories between the top level
// and the module, for the linked worktree its .git file, gitdir and the
// common directory's files; and for objects and refs, only the access(2)
// call git makes of them (no stat: git asks nothing else). It is the
// floor of a check that stats each file by its path, as the stat path
// does: the kernel walks every path from the root. (Stats relative to a
// directory descriptor held open would walk less, but a held descriptor
// keeps answering for a directory renamed away.)
func BenchmarkStatFloor(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		deps := settledGuard(b, module).bound.Load().snap.Load().Deps
		paths := make([]string, len(deps))
		lstat := make([]bool, len(deps))
		access := make([]bool, len(deps))
		for i, d := range deps {
			paths[i], lstat[i], access[i] = d.Path, d.NoFollow, d.Identity
		}
		b.ReportAllocs()
		b.ResetTimer()
		var st unix.Stat_t
		for i := 0; i < b.N; i++ {
			for j, p := range paths {
				switch {
				case access[j]:
					_ = unix.Access(p, unix.X_OK)
				case lstat[j]:
					_ = unix.Lstat(p, &st)
				default:
					_ = unix.Stat(p, &st)
				}
			}
		}
		b.ReportMetric(float64(len(deps)), "files")
	})
}

// BenchmarkReferenceGitCLI is what the reference implementation does per
// check: three git processes.
func BenchmarkReferenceGitCLI(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		dir := filepath.Dir(module)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			runGitCommands(b, dir,
				[]string{"rev-parse", "--show-toplevel"},
				[]string{"--literal-pathspecs", "ls-files", "--error-unmatch", "--", filepath.Base(module)},
				[]string{"rev-parse", "--verify", "HEAD"})
		}
	})
}

// BenchmarkFullRead is the guard's check after a change, on the watch
// path and on the stat path: before each check (untimed), HEAD is
// written again with the same content and renamed over, as git writes it,
// so the revision stays; the check finds the change (an inotify event,
// or HEAD's stamp), reads HEAD, the refs, the config and the whole index
// on the goroutine of the binding's reads, arms its watches again on the
// watch path, and hands the answer back. The clock runs an hour ahead, so
// that one read settles (fullreads/op 1). BenchmarkReadRevision is the
// reader alone.
func BenchmarkFullRead(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		head := filepath.Join(git(b, filepath.Dir(module), "rev-parse", "--absolute-git-dir"), "HEAD")
		content, err := os.ReadFile(head)
		if err != nil {
			b.Fatal(err)
		}
		for _, path := range []string{"watch", "stat"} {
			b.Run(path, func(b *testing.B) {
				e := settledEnv()
				if path == "watch" {
					e = watchEnv(b)
					e.now = settledEnv().now
				}
				g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(b)}, e)
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				for i := 0; i < 3; i++ {
					if err := g.EnsureCurrent(); err != nil {
						b.Fatal(err)
					}
				}
				if o := g.Observe(); o.Check != path {
					b.Fatalf("checks take the %s path (%s), not %s", o.Check, o.CheckReason, path)
				}
				lock := head + ".lock"
				b.ReportAllocs()
				before := g.Stats().FullReads
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					if err := os.WriteFile(lock, content, 0o644); err != nil {
						b.Fatal(err)
					}
					if err := os.Rename(lock, head); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if err := g.EnsureCurrent(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(g.Stats().FullReads-before)/float64(b.N), "fullreads/op")
			})
		}
	})
}

// BenchmarkReadRevision is the reader alone, as BenchmarkFullRead's
// check calls it: HEAD, the refs, the config and the whole index, read
// and parsed, with no guard around it (no goroutine, no watch).
func BenchmarkReadRevision(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if rev, err := inspectRevision(module); err != nil || rev == "" {
				b.Fatal(rev, err)
			}
		}
	})
}

var (
	bigOnce sync.Once
	bigDir  string
)

// bigSetup makes a checkout of 100,000 tracked files, once per run.
func bigSetup(b *testing.B) string {
	b.Helper()
	bigOnce.Do(func() {
		root := benchSetup(b).root
		bigDir = filepath.Join(root, "big")
		makeCheckout(b, bigDir, 100000, 10)
	})
	return bigDir
}

// BenchmarkBind100k binds a guard to a checkout of 100,000 tracked files
// (and closes it): the settled read New makes once at startup, which
// reads the index whole, stats every file it depended on again, and on
// the watch path arms the inotify watches. BenchmarkBindGitCLI100k is the
// same answer from git.
func BenchmarkBind100k(b *testing.B) {
	dir := bigSetup(b)
	module := filepath.Join(dir, "run_agent.py")
	b.Logf("100,001 tracked files, 10 packed refs, made by %s", gittest.Describe())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g, err := New(Options{ModulePath: module, HomeDir: dir})
		if err != nil || g.Identity().Revision == "" {
			b.Fatal(err)
		}
		if i == 0 {
			o := g.Observe()
			b.Logf("checks take the %s path", o.Check)
		}
		g.Close()
	}
}

// BenchmarkBind100kReftable is BenchmarkBind100k on a reftable
// repository of the same files (its stack: one table of ten refs).
func BenchmarkBind100kReftable(b *testing.B) {
	if !gittest.HasReftable() {
		b.Skip("the git on PATH makes no reftable repository (before 2.45)")
	}
	dir := filepath.Join(benchSetup(b).root, "big-reftable")
	if _, err := os.Stat(dir); err != nil {
		makeCheckout(b, dir, 100000, 10, "--ref-format=reftable")
	}
	module := filepath.Join(dir, "run_agent.py")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g, err := New(Options{ModulePath: module, HomeDir: dir})
		if err != nil || g.Identity().Revision == "" {
			b.Fatal(err)
		}
		g.Close()
	}
}

// BenchmarkBindGitCLI100k is the same answer from git: ls-files
// --error-unmatch and rev-parse on the same checkout.
func BenchmarkBindGitCLI100k(b *testing.B) {
	dir := bigSetup(b)
	b.Logf("%s", gittest.Describe())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runGitCommands(b, dir,
			[]string{"--literal-pathspecs", "ls-files", "--error-unmatch", "--", "run_agent.py"},
			[]string{"rev-parse", "--verify", "HEAD"})
	}
}

// runGitCommands runs each git command line in dir, as the reference
// implementation does (plain processes), in the tests' isolated git
// environment: no global or system configuration.
func runGitCommands(b *testing.B, dir string, commands ...[]string) {
	for _, args := range commands {
		cmd := gittest.Command(dir, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
}
