//go:build unix

package systemd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// listenFDsStart is the first descriptor socket activation passes
// (SD_LISTEN_FDS_START).
const listenFDsStart = 3

// ListenFiles returns the sockets the service manager passed this
// process, as sd_listen_fds_with_names(3) with unset_environment set: the
// descriptors from 3 on, $LISTEN_FDS of them, provided $LISTEN_PID is
// this process's ID (they were passed to this process, not inherited from
// a parent), each named by $LISTEN_FDNAMES (colon-separated, one per
// descriptor; "unknown" when the variable is unset) and marked
// close-on-exec. It unsets the variables whatever it finds, so that no
// child takes the sockets for its own. No variables, or another process's,
// is no sockets and no error; malformed ones are an error.
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
	count, ok := os.LookupEnv("LISTEN_FDS")
	if !ok {
		return nil, nil
	}
	n, err := strconv.Atoi(count)
	if err != nil || n <= 0 || n > 1<<16 {
		return nil, fmt.Errorf("LISTEN_FDS=%q: no count of descriptors", count)
	}
	names := make([]string, n)
	if v, ok := os.LookupEnv("LISTEN_FDNAMES"); ok {
		names = strings.Split(v, ":")
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
		fd := listenFDsStart + i
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			for _, f := range files[:i] {
				f.Close()
			}
			return nil, fmt.Errorf("LISTEN_FDS=%d: descriptor %d: %w", n, fd, err)
		}
		syscall.CloseOnExec(fd)
		files[i] = os.NewFile(uintptr(fd), names[i])
	}
	return files, nil
}

// unsetListenEnv unsets the variables of socket activation.
func unsetListenEnv() {
	for _, v := range []string{"LISTEN_PID", "LISTEN_PIDFDID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(v)
	}
}
