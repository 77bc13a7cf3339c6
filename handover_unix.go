//go:build unix

package runtimeguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/systemd"
)

// The environment an ExecHandover passes the new image; Inherit unsets it.
const (
	handoverPIDEnv      = "RUNTIMEGUARD_HANDOVER_PID"      // the process the handover is for
	handoverFDsEnv      = "RUNTIMEGUARD_HANDOVER_FDS"      // the kept sockets' descriptors, comma-separated
	handoverRevisionEnv = "RUNTIMEGUARD_HANDOVER_REVISION" // the plan's revision
	handoverReceiptEnv  = "RUNTIMEGUARD_HANDOVER_RECEIPT"  // the plan's receipt
	handoverLockEnv     = "RUNTIMEGUARD_HANDOVER_LOCK_FD"  // the plan's lock
)

var handoverEnv = []string{handoverPIDEnv, handoverFDsEnv, handoverRevisionEnv, handoverReceiptEnv, handoverLockEnv}

// Handover quiesces the host and execs the program anew, passing it the
// sockets and the plan; it returns only when that failed.
func (h *ExecHandover) Handover(ctx context.Context, plan *Plan) error {
	if err := h.check(ctx, plan); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("runtimeguard: exec handover: %w", err)
	}
	// Copies of the sockets, close-on-exec until the exec itself: they
	// keep each socket open while the host closes its listeners.
	files := make([]*os.File, 0, len(h.Listeners))
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, l := range h.Listeners {
		fl, ok := l.(interface{ File() (*os.File, error) })
		if !ok {
			return fmt.Errorf("runtimeguard: exec handover: a %T cannot be kept across exec", l)
		}
		if ul, ok := l.(*net.UnixListener); ok {
			ul.SetUnlinkOnClose(false) // the path stays for the new image
		}
		f, err := fl.File()
		if err != nil {
			return fmt.Errorf("runtimeguard: exec handover: %w", err)
		}
		files = append(files, f)
	}
	if err := h.Quiesce(ctx); err != nil {
		return h.resume(fmt.Errorf("runtimeguard: exec handover: quiesce: %w", err), files)
	}
	err = execKeeping(exe, files, plan)
	return h.resume(fmt.Errorf("runtimeguard: exec handover: %w", err), files)
}

// resume serves again on the sockets files hold, after a handover failed
// with err.
func (h *ExecHandover) resume(err error, files []*os.File) error {
	lns := make([]net.Listener, 0, len(files))
	for _, f := range files {
		l, lerr := net.FileListener(f)
		if lerr != nil {
			for _, l := range lns {
				l.Close()
			}
			return errors.Join(err, fmt.Errorf("runtimeguard: exec handover: resume: %w", lerr))
		}
		lns = append(lns, l)
	}
	if rerr := h.Resume(lns); rerr != nil {
		return errors.Join(err, fmt.Errorf("runtimeguard: exec handover: resume: %w", rerr))
	}
	return err
}

// keptCopy is a copy of the descriptor fd that an exec keeps (not
// close-on-exec), numbered 3 or more: the new image's Inherit takes none
// below 3, its standard streams, which a host that closed one would
// otherwise hand out.
func keptCopy(fd uintptr) (int, error) {
	return unix.FcntlInt(fd, unix.F_DUPFD, 3)
}

// execKeeping replaces the process image, keeping files and the plan's
// lock open through copies without close-on-exec. The copies are made
// under syscall.ForkLock, so that no child process another goroutine
// starts meanwhile inherits them; it returns only when the exec failed.
func execKeeping(exe string, files []*os.File, plan *Plan) error {
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	var kept []int
	defer func() {
		for _, fd := range kept {
			syscall.Close(fd)
		}
	}()
	dup := func(f *os.File) (int, error) {
		raw, err := f.SyscallConn()
		if err != nil {
			return -1, err
		}
		fd, derr := -1, error(nil)
		if err := raw.Control(func(sysfd uintptr) { fd, derr = keptCopy(sysfd) }); err != nil {
			return -1, err
		}
		if derr == nil {
			kept = append(kept, fd)
		}
		return fd, derr
	}
	fds := make([]string, 0, len(files))
	for _, f := range files {
		fd, err := dup(f)
		if err != nil {
			return err
		}
		fds = append(fds, strconv.Itoa(fd))
	}
	env := make([]string, 0, len(os.Environ())+5)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !isHandoverEnv(name) {
			env = append(env, kv)
		}
	}
	env = append(env, handoverPIDEnv+"="+strconv.Itoa(os.Getpid()), handoverFDsEnv+"="+strings.Join(fds, ","),
		handoverRevisionEnv+"="+plan.To, handoverReceiptEnv+"="+plan.Receipt.ID)
	if lock := plan.LockFile(); lock != nil {
		fd, err := dup(lock)
		if err != nil {
			return err
		}
		env = append(env, handoverLockEnv+"="+strconv.Itoa(fd))
	}
	err := syscall.Exec(exe, os.Args, env)
	return &os.PathError{Op: "exec", Path: exe, Err: err} // the program it could not execute
}

func isHandoverEnv(name string) bool {
	for _, v := range handoverEnv {
		if name == v {
			return true
		}
	}
	return false
}

// Inherit returns what the [ExecHandover] that started this image passed
// it, or else what socket activation passed; nil when there is nothing.
func Inherit() (*Inherited, error) {
	defer func() {
		for _, v := range handoverEnv {
			os.Unsetenv(v)
		}
	}()
	pid, ok := os.LookupEnv(handoverPIDEnv)
	if !ok || pid != strconv.Itoa(os.Getpid()) {
		return activated()
	}
	in := &Inherited{ExpectRevision: os.Getenv(handoverRevisionEnv), ExpectReceipt: os.Getenv(handoverReceiptEnv)}
	// The handover's descriptors are this program's own, named by its
	// previous image for this process: on an error none is left behind,
	// open and holding a port or the plan's lock, for nothing to serve or
	// for a child to inherit. Each is checked (one this process opened
	// since its exec is not the handover's, and is not touched), then all
	// are marked close-on-exec under syscall.ForkLock, so that no child
	// started meanwhile inherits one; an error closes every one the check
	// passed and no listener took.
	named := map[int]bool{}
	var fds []int
	lock := -1
	fail := func(err error) (*Inherited, error) {
		for fd := range named {
			syscall.Close(fd)
		}
		return nil, err
	}
	parse := func(s string) (int, error) {
		fd, err := strconv.Atoi(s)
		switch {
		case err != nil || fd < 3:
			return 0, fmt.Errorf("runtimeguard: inherit: %q is no descriptor", s)
		case named[fd]:
			return 0, fmt.Errorf("runtimeguard: inherit: descriptor %d is named twice", fd)
		}
		if err := systemd.Passed(fd); err != nil {
			return 0, fmt.Errorf("runtimeguard: inherit: %w", err)
		}
		named[fd] = true
		return fd, nil
	}
	var err error // the first refusal; every entry is checked
	if in.ExpectRevision == "" {
		err = errors.New("runtimeguard: inherit: the handover names no revision")
	}
	syscall.ForkLock.RLock()
	if s := os.Getenv(handoverLockEnv); s != "" {
		fd, perr := parse(s)
		if perr == nil {
			lock = fd
		} else if err == nil {
			err = perr
		}
	}
	if s := os.Getenv(handoverFDsEnv); s != "" {
		for _, e := range strings.Split(s, ",") {
			fd, perr := parse(e)
			if perr == nil {
				fds = append(fds, fd)
			} else if err == nil {
				err = perr
			}
		}
	}
	for fd := range named {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return fail(err)
	}
	if lock >= 0 {
		in.lock = os.NewFile(uintptr(lock), "inherited")
		delete(named, lock) // Release closes it
	}
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "inherited")
		delete(named, fd) // f closes it
		l, err := net.FileListener(f)
		f.Close() // the listener holds its own descriptor
		if err != nil {
			for _, l := range in.Listeners {
				l.Close()
			}
			in.Release()
			return fail(fmt.Errorf("runtimeguard: inherit: %w", err))
		}
		in.Listeners = append(in.Listeners, l)
	}
	return in, nil
}

// activated returns what a service manager passed, as Inherit does.
func activated() (*Inherited, error) {
	files, err := systemd.ListenFiles()
	if err != nil {
		return nil, fmt.Errorf("runtimeguard: inherit: %w", err)
	}
	if len(files) == 0 {
		return nil, nil
	}
	in := &Inherited{names: make(map[any]string, len(files))}
	for _, f := range files {
		switch systemd.KindOf(f) {
		case systemd.Listening:
			if l, err := net.FileListener(f); err == nil {
				in.names[l] = f.Name()
				f.Close() // the listener holds its own descriptor
				in.Listeners = append(in.Listeners, l)
				continue
			}
		case systemd.Datagram:
			if c, err := net.FilePacketConn(f); err == nil {
				in.names[c] = f.Name()
				f.Close() // the connection holds its own descriptor
				in.PacketConns = append(in.PacketConns, c)
				continue
			}
		}
		in.names[f] = f.Name()
		in.Files = append(in.Files, f) // the host's to serve, as passed
	}
	return in, nil
}
