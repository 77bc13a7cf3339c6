//go:build unix

package systemd

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenFDsStart is the first descriptor socket activation passes
// (SD_LISTEN_FDS_START).
const listenFDsStart = 3

// ListenFiles returns the descriptors the service manager passed this
// process, of any kind (listening sockets, datagram sockets, FIFOs,
// files), as sd_listen_fds_with_names(3) with unset_environment set: the
// descriptors from 3 on, $LISTEN_FDS of them, provided $LISTEN_PID is this
// process's ID and $LISTEN_PIDFDID, where set and this kernel can tell,
// the ID of this process's pidfd (they were passed to this process, not
// inherited from a parent), each named by $LISTEN_FDNAMES
// (colon-separated, one per descriptor; "unknown" when the variable is
// unset) and marked close-on-exec.
//
// Before it takes one, it checks every descriptor (see Passed): a count
// past what was passed would otherwise take, and let its caller close,
// descriptors this process opened itself (a host's log file, the Go
// runtime's own). A descriptor that fails the check is an error, and then
// none is taken, none is closed and none is changed. Once all passed it,
// each is marked close-on-exec before the names are counted, as
// sd_listen_fds_with_names compares the count of names with the
// descriptors only after sd_listen_fds(3) marked them: names that do not
// match are an error that leaves the descriptors open, and none for a
// child to inherit.
//
// It unsets the variables whatever it finds, so that no child takes the
// descriptors for its own. No variables, or another process's, is no
// descriptors and no error; malformed ones are an error.
func ListenFiles() ([]*os.File, error) {
	defer unsetListenEnv()
	pid, ok := os.LookupEnv("LISTEN_PID")
	if !ok {
		return nil, nil
	}
	p, err := strconv.Atoi(pid)
	if err != nil || p <= 0 {
		return nil, fmt.Errorf("LISTEN_PID=%q: no process ID", pid)
	}
	if p != os.Getpid() {
		return nil, nil
	}
	if v, ok := os.LookupEnv("LISTEN_PIDFDID"); ok {
		want, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("LISTEN_PIDFDID=%q: no pidfd ID", v)
		}
		if own, ok := ownPidfdID(); ok && own != want {
			return nil, nil // another process of this ID (a reused one)
		}
	}
	count, ok := os.LookupEnv("LISTEN_FDS")
	if !ok {
		return nil, nil
	}
	n, err := strconv.Atoi(count)
	if err != nil || n <= 0 || n > 1<<16 {
		return nil, fmt.Errorf("LISTEN_FDS=%q: no count of descriptors", count)
	}
	for i := range n {
		if err := Passed(listenFDsStart + i); err != nil {
			return nil, fmt.Errorf("LISTEN_FDS=%d: %w", n, err)
		}
	}
	for i := range n {
		syscall.CloseOnExec(listenFDsStart + i)
	}
	names := make([]string, n)
	if v, ok := os.LookupEnv("LISTEN_FDNAMES"); ok {
		names = nil // set but empty: no names, as sd_listen_fds_with_names splits it
		if v != "" {
			names = strings.Split(v, ":")
		}
		if len(names) != n {
			return nil, fmt.Errorf("LISTEN_FDNAMES=%q names %d descriptors, LISTEN_FDS=%d", v, len(names), n)
		}
	} else {
		for i := range names {
			names[i] = "unknown"
		}
	}
	files := make([]*os.File, n)
	for i := range files {
		files[i] = os.NewFile(uintptr(listenFDsStart+i), names[i])
	}
	return files, nil
}

// ErrNotPassed matches the error of Passed for a descriptor that no
// process passed this one across an exec.
var ErrNotPassed = errors.New("not passed to this process")

// Passed checks that fd may have been passed to this process across an
// exec, before it is taken: that it is open (fcntl F_GETFD) and not
// marked close-on-exec, which no descriptor that survived an exec can
// be. One marked so was opened by this process since its exec (the Go
// runtime's own descriptors, a host's log file, anything opened through
// the os package) or taken already. The error matches ErrNotPassed.
func Passed(fd int) error {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	switch {
	case err != nil:
		return fmt.Errorf("descriptor %d: %w (%w)", fd, ErrNotPassed, err)
	case flags&unix.FD_CLOEXEC != 0:
		return fmt.Errorf("descriptor %d is marked close-on-exec, so this process opened it since its exec, or took it already: %w", fd, ErrNotPassed)
	}
	return nil
}

// unsetListenEnv unsets the variables of socket activation.
func unsetListenEnv() {
	for _, v := range []string{"LISTEN_PID", "LISTEN_PIDFDID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(v)
	}
}

// The kinds of descriptor a service manager passes, as a server takes
// them (see KindOf).
const (
	// Other is anything but a socket below: a FIFO, a file, a device, a
	// connected stream socket (Accept=yes), a netlink socket.
	Other = iota
	// Listening is a listening socket: stream or sequential packets
	// (SO_ACCEPTCONN set), which a net.Listener serves.
	Listening
	// Datagram is a datagram socket, which a net.PacketConn serves.
	Datagram
)

// KindOf says which of the kinds above f is, as sd_is_socket(3) tells
// them: by its socket type (SO_TYPE) and whether it listens
// (SO_ACCEPTCONN).
func KindOf(f *os.File) int {
	raw, err := f.SyscallConn()
	if err != nil {
		return Other
	}
	kind := Other
	_ = raw.Control(func(fd uintptr) {
		typ, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
		if err != nil {
			return // no socket
		}
		switch listening, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ACCEPTCONN); {
		case err == nil && listening != 0 && (typ == unix.SOCK_STREAM || typ == unix.SOCK_SEQPACKET):
			kind = Listening
		case typ == unix.SOCK_DGRAM:
			kind = Datagram
		}
	})
	return kind
}
