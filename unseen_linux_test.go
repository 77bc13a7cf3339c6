package runtimeguard

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
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
