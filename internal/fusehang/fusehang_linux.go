package fusehang

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// The FUSE opcodes the server answers (linux/fuse.h).
const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opReadlink    = 5
	opStatfs      = 17
	opInit        = 26
	opReaddir     = 28
	opInterrupt   = 36
	opDestroy     = 38
	opBatchForget = 42
)

const (
	inHeaderSize  = 40
	outHeaderSize = 16
	attrSize      = 88
	rootID        = 1
)

// FS is a mounted file system of one directory (the mount point, Dir)
// holding symbolic links.
type FS struct {
	// Dir is the mount point.
	Dir   string
	names []string // the links' names; node i+2 is names[i]
	links map[string]string

	fd       int
	hung     atomic.Bool
	stop     atomic.Bool
	done     chan struct{}
	mu       sync.Mutex
	pending  int // requests received since Hang, never answered
	tornDown sync.Once
	tb       testing.TB // for the mount lock (gittest.LockMounts)
}

// Mount mounts, at dir (an empty directory), a file system whose root
// holds links (name to target), answering every request until Hang. It
// skips the test, with the reason, where the host cannot mount one (no
// /dev/fuse, no privilege to mount). The mount is torn down when the test
// ends.
func Mount(tb testing.TB, dir string, links map[string]string) *FS {
	tb.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		tb.Skipf("no hung file system can be made here: %v", err)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		tb.Skipf("no hung file system can be made here: open /dev/fuse: %v", err)
	}
	f := &FS{Dir: dir, links: links, fd: fd, done: make(chan struct{}), tb: tb}
	for name := range links {
		f.names = append(f.names, name)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40755,user_id=%d,group_id=%d,allow_other", fd, os.Getuid(), os.Getgid())
	unlock := gittest.LockMounts(tb)
	err = unix.Mount("fusehang", dir, "fuse.fusehang", unix.MS_NOSUID|unix.MS_NODEV, opts)
	unlock()
	if err != nil {
		unix.Close(fd)
		tb.Skipf("no hung file system can be made here: mount a FUSE file system at %s: %v", dir, err)
	}
	go f.serve()
	tb.Cleanup(f.tearDown)
	// A test that times out panics without running its cleanups, and a
	// process with calls blocked on a file system it serves itself can
	// never exit (closing its files sends requests nobody answers): tear
	// down before the test's deadline, so that a hang the test did not
	// bound fails the test instead of leaving a process that never ends.
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			timer := time.AfterFunc(time.Until(deadline)-5*time.Second, f.tearDown)
			tb.Cleanup(func() { timer.Stop() })
		}
	}
	// The first request (INIT) is answered before any other.
	if _, err := os.Lstat(dir); err != nil {
		tb.Fatalf("the FUSE file system at %s does not answer: %v", dir, err)
	}
	return f
}

// Hang makes the file system stop answering: every request from now on,
// and every one that is not answered yet, waits until the test ends.
func (f *FS) Hang() { f.hung.Store(true) }

// Pending is the number of requests received since Hang: each is a system
// call blocked on the file system.
func (f *FS) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending
}

// TearDown ends the hang before the test does, as its cleanup would: for
// a test that looks at what a process blocked on the file system did once
// it can end (a process whose thread waits on the file system cannot be
// reaped until then).
func (f *FS) TearDown() { f.tearDown() }

// tearDown aborts the connection (closing the device's last descriptor
// does, so every blocked call returns ENOTCONN) and detaches the mount.
func (f *FS) tearDown() {
	f.tornDown.Do(func() {
		f.stop.Store(true)
		<-f.done
		unix.Close(f.fd)
		defer gittest.LockMounts(f.tb)()
		for i := 0; i < 50; i++ {
			err := unix.Unmount(f.Dir, unix.MNT_DETACH)
			if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// serve reads requests until tearDown; it polls so that it can stop.
func (f *FS) serve() {
	defer close(f.done)
	buf := make([]byte, 1<<17)
	for !f.stop.Load() {
		pfd := []unix.PollFd{{Fd: int32(f.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, 20); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		n, err := unix.Read(f.fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR), errors.Is(err, unix.ENOENT):
			continue
		case err != nil || n < inHeaderSize:
			return // ENODEV: unmounted
		}
		f.handle(buf[:n])
	}
}

var le = binary.LittleEndian

// handle answers one request, unless the file system hangs.
func (f *FS) handle(req []byte) {
	opcode := le.Uint32(req[4:])
	unique := le.Uint64(req[8:])
	node := le.Uint64(req[16:])
	body := req[inHeaderSize:]
	switch opcode {
	case opForget, opBatchForget, opInterrupt, opDestroy:
		return // no answer expected (an interrupt may go unanswered)
	}
	if f.hung.Load() && opcode != opInit {
		f.mu.Lock()
		f.pending++
		f.mu.Unlock()
		return
	}
	switch opcode {
	case opInit:
		out := make([]byte, 64)
		le.PutUint32(out[0:], 7)      // major
		le.PutUint32(out[4:], 26)     // minor
		le.PutUint32(out[8:], 0)      // max_readahead
		le.PutUint32(out[12:], 0)     // flags
		le.PutUint16(out[16:], 1)     // max_background
		le.PutUint16(out[18:], 1)     // congestion_threshold
		le.PutUint32(out[20:], 1<<16) // max_write
		le.PutUint32(out[24:], 1)     // time_gran
		f.reply(unique, 0, out)
	case opLookup:
		name := string(body)
		if i := indexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		for i, n := range f.names {
			if n == name {
				out := make([]byte, 40+attrSize)
				le.PutUint64(out[0:], uint64(i+2)) // nodeid
				f.attr(out[40:], uint64(i+2))
				f.reply(unique, 0, out) // entry and attributes valid for 0 s
				return
			}
		}
		f.reply(unique, -int32(unix.ENOENT), nil)
	case opGetattr:
		out := make([]byte, 16+attrSize)
		f.attr(out[16:], node)
		f.reply(unique, 0, out)
	case opReadlink:
		if node < 2 || int(node-2) >= len(f.names) {
			f.reply(unique, -int32(unix.EINVAL), nil)
			return
		}
		f.reply(unique, 0, []byte(f.links[f.names[node-2]]))
	case opReaddir:
		f.reply(unique, 0, f.dirents(le.Uint64(body[8:]), int(le.Uint32(body[16:]))))
	case opStatfs:
		out := make([]byte, 80)
		le.PutUint32(out[40:], 4096) // bsize
		le.PutUint32(out[44:], 255)  // namelen
		le.PutUint32(out[48:], 4096) // frsize
		f.reply(unique, 0, out)
	default:
		f.reply(unique, -int32(unix.ENOSYS), nil)
	}
}

// dirents are the root's entries from the one at offset on (".", "..",
// then the links), as struct fuse_dirent records of at most size bytes in
// all: each names the offset of the one after it.
func (f *FS) dirents(offset uint64, size int) []byte {
	type entry struct {
		ino  uint64
		typ  uint32
		name string
	}
	entries := []entry{{rootID, unix.DT_DIR, "."}, {rootID, unix.DT_DIR, ".."}}
	for i, n := range f.names {
		entries = append(entries, entry{uint64(i + 2), unix.DT_LNK, n})
	}
	var out []byte
	for i := offset; i < uint64(len(entries)); i++ {
		e := entries[i]
		rec := make([]byte, (24+len(e.name)+7)&^7)
		le.PutUint64(rec[0:], e.ino)
		le.PutUint64(rec[8:], i+1) // the offset of the next entry
		le.PutUint32(rec[16:], uint32(len(e.name)))
		le.PutUint32(rec[20:], e.typ)
		copy(rec[24:], e.name)
		if len(out)+len(rec) > size {
			break
		}
		out = append(out, rec...)
	}
	return out
}

// attr writes the attributes of node: the root directory, or a link.
func (f *FS) attr(out []byte, node uint64) {
	le.PutUint64(out[0:], node) // ino
	mode, size := uint32(unix.S_IFDIR|0o755), uint64(0)
	if node >= 2 && int(node-2) < len(f.names) {
		mode, size = unix.S_IFLNK|0o777, uint64(len(f.links[f.names[node-2]]))
	}
	le.PutUint64(out[8:], size)
	le.PutUint64(out[32:], 1) // mtime: long settled
	le.PutUint64(out[40:], 1) // ctime
	le.PutUint32(out[60:], mode)
	le.PutUint32(out[64:], 1) // nlink
	le.PutUint32(out[68:], uint32(os.Getuid()))
	le.PutUint32(out[72:], uint32(os.Getgid()))
	le.PutUint32(out[80:], 4096) // blksize
}

// reply writes one answer.
func (f *FS) reply(unique uint64, errno int32, body []byte) {
	out := make([]byte, outHeaderSize+len(body))
	le.PutUint32(out[0:], uint32(len(out)))
	le.PutUint32(out[4:], uint32(errno))
	le.PutUint64(out[8:], unique)
	copy(out[outHeaderSize:], body)
	_, _ = unix.Write(f.fd, out)
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
