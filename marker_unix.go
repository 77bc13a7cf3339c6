//go:build unix

package runtimeguard

import (
	"errors"
	"math"

	"golang.org/x/sys/unix"
)

// maxPID is the largest process ID kill(2) can be asked about: pid_t is a
// 32-bit signed integer, and unix.Kill would silently truncate a larger one.
const maxPID = math.MaxInt32

// safeOpenMarker opens the marker with O_NONBLOCK|O_NOFOLLOW, asks the
// descriptor what it is, and reads at most MaxMarkerBytes+1 bytes. It goes
// through unix.Open and unix.Read rather than os.OpenFile: an *os.File opened
// with O_NONBLOCK joins the runtime poller, and a read of a FIFO would park.
func safeOpenMarker(path string) ([]byte, fileKind) {
	// An lstat first keeps us from opening a device, whose open can have
	// side effects; the descriptor is checked again after the open.
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Lstat(path, &st) }); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fileAbsent
		}
		return nil, fileUnusable
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > MaxMarkerBytes {
		return nil, fileUnusable
	}
	var fd int
	err := ignoringEINTR(func() error {
		var err error
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		return err
	})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fileAbsent
		}
		return nil, fileUnusable
	}
	defer unix.Close(fd)
	if err := ignoringEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return nil, fileUnusable
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > MaxMarkerBytes {
		return nil, fileUnusable
	}
	// Read one byte more than fstat reported: a file that changed size
	// while it was read proves nothing.
	buf := make([]byte, st.Size+1)
	n := 0
	for n < len(buf) {
		var m int
		err := ignoringEINTR(func() error {
			var err error
			m, err = unix.Read(fd, buf[n:])
			return err
		})
		if err != nil {
			return nil, fileUnusable
		}
		if m == 0 {
			break
		}
		n += m
	}
	if int64(n) != st.Size {
		return nil, fileUnusable
	}
	return buf[:n], fileRead
}

// probeProcess asks with signal 0 whether pid exists: EPERM means it exists
// but belongs to someone else. Where the platform says when the process
// started, or that it is a zombie, the answer says so too.
func probeProcess(pid int) procInfo {
	if pid <= 0 || pid > maxPID {
		return procInfo{}
	}
	err := unix.Kill(pid, 0)
	switch {
	case err == nil || errors.Is(err, unix.EPERM):
	case errors.Is(err, unix.ESRCH):
		return procInfo{state: processGone}
	default:
		return procInfo{}
	}
	start, zombie := processStart(pid)
	if zombie {
		return procInfo{state: processGone}
	}
	return procInfo{state: processAlive, start: start}
}

// ignoringEINTR retries fn while it fails with EINTR.
func ignoringEINTR(fn func() error) error {
	for {
		err := fn()
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
