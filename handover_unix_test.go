//go:build unix

package runtimeguard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// clearHandoverEnv unsets the handover's variables for the test, and
// restores them after.
func clearHandoverEnv(t *testing.T) {
	for _, v := range handoverEnv {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
}

func handoverEnvLeft() []string {
	var left []string
	for _, v := range handoverEnv {
		if _, ok := os.LookupEnv(v); ok {
			left = append(left, v)
		}
	}
	return left
}

// Inherit takes a handover only for this process, and unsets its
// variables whatever it finds.
func TestInherit(t *testing.T) {
	clearHandoverEnv(t)
	in, err := Inherit()
	assert.NoError(t, err)
	assert.Nil(t, in, "no handover")

	t.Setenv(handoverPIDEnv, strconv.Itoa(os.Getppid()))
	t.Setenv(handoverRevisionEnv, "abc")
	in, err = Inherit()
	assert.NoError(t, err)
	assert.Nil(t, in, "a handover for another process")
	assert.Empty(t, handoverEnvLeft())

	t.Setenv(handoverPIDEnv, strconv.Itoa(os.Getpid()))
	in, err = Inherit()
	assert.Error(t, err, "no revision")
	assert.Nil(t, in)
	assert.Empty(t, handoverEnvLeft())

	t.Setenv(handoverPIDEnv, strconv.Itoa(os.Getpid()))
	t.Setenv(handoverRevisionEnv, "abc")
	t.Setenv(handoverFDsEnv, "1x")
	in, err = Inherit()
	assert.Error(t, err, "a malformed descriptor")
	assert.Nil(t, in)

	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer ln.Close()
	// The descriptor is handed over as an exec hands it: a number that
	// nothing else in the process owns, which Inherit takes (and closes).
	// An *os.File's own descriptor would be closed twice, the second
	// time by its finalizer, on whatever file has its number by then.
	f, err := ln.File()
	require.NoError(t, err)
	fd, err := syscall.Dup(int(f.Fd()))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	t.Setenv(handoverPIDEnv, strconv.Itoa(os.Getpid()))
	t.Setenv(handoverRevisionEnv, "abc")
	t.Setenv(handoverReceiptEnv, "update_id:u1")
	t.Setenv(handoverFDsEnv, strconv.Itoa(fd))
	in, err = Inherit()
	require.NoError(t, err)
	require.Len(t, in.Listeners, 1)
	defer in.Listeners[0].Close()
	assert.Equal(t, "abc", in.ExpectRevision)
	assert.Equal(t, "update_id:u1", in.ExpectReceipt)
	assert.Equal(t, ln.Addr().String(), in.Listeners[0].Addr().String(), "the same socket")
	assert.Empty(t, handoverEnvLeft())
	in.Release()
	in.Release()
}

// A handover that Inherit refuses leaves nothing behind: every descriptor
// it names that is the handover's (the plan's lock, the sockets before
// and after the one refused) is closed, so the port is free for the host
// to listen on again and the lock free for the next update, and none is
// left for a child to inherit; one this process opened itself is left as
// it was. Whether the handover names no revision, its list is malformed,
// names a descriptor twice or one this process opened, or names one that
// is no socket.
func TestInheritOnAnErrorLeavesNothingBehind(t *testing.T) {
	// passed is a descriptor as an exec hands it: a number that nothing
	// else in the process owns, not close-on-exec.
	passed := func(f *os.File) int {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD, 3)
		require.NoError(t, err)
		return fd
	}
	// socket is a listening socket's passed descriptor, and its address:
	// the test's own descriptors of it are closed.
	socket := func() (int, string) {
		ln, f := gittest.ListenerFile(t)
		fd := passed(f)
		addr := ln.Addr().String()
		f.Close()
		ln.Close()
		return fd, addr
	}
	file := func(t *testing.T) int {
		f, err := os.Create(filepath.Join(tempDir(t), "a-file"))
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		return passed(f)
	}
	own, err := os.Open(os.DevNull) // this process's own, close-on-exec
	require.NoError(t, err)
	defer own.Close()
	for _, tc := range []struct {
		name string
		// list is the handover's descriptors, as the env names them, and
		// the addresses of its sockets.
		list func(t *testing.T) (list string, addrs []string)
		err  string
	}{
		{"a malformed entry", func(*testing.T) (string, []string) {
			a, aa := socket()
			b, ba := socket()
			return fmt.Sprintf("%d,1x,%d", a, b), []string{aa, ba}
		}, `"1x" is no descriptor`},
		{"a descriptor named twice", func(*testing.T) (string, []string) {
			a, aa := socket()
			return fmt.Sprintf("%d,%d", a, a), []string{aa}
		}, "named twice"},
		{"a descriptor this process opened", func(*testing.T) (string, []string) {
			a, aa := socket()
			return fmt.Sprintf("%d,%d", a, int(own.Fd())), []string{aa}
		}, "not passed to this process"},
		{"no revision", func(*testing.T) (string, []string) {
			a, aa := socket()
			return fmt.Sprintf("%d", a), []string{aa}
		}, "the handover names no revision"},
		{"a descriptor that is no socket", func(t *testing.T) (string, []string) {
			a, aa := socket()
			b := file(t)
			c, ca := socket()
			return fmt.Sprintf("%d,%d,%d", a, b, c), []string{aa, ca}
		}, "runtimeguard: inherit: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearHandoverEnv(t)
			list, addrs := tc.list(t)
			// The plan's lock, held shared on the passed descriptor, an
			// open file of its own.
			lockPath := filepath.Join(tempDir(t), "update.lock")
			lock, err := unix.Open(lockPath, unix.O_RDWR|unix.O_CREAT, 0o644)
			require.NoError(t, err)
			require.NoError(t, unix.Flock(lock, unix.LOCK_SH))
			t.Setenv(handoverPIDEnv, strconv.Itoa(os.Getpid()))
			if tc.name != "no revision" {
				t.Setenv(handoverRevisionEnv, "abc")
			}
			t.Setenv(handoverLockEnv, strconv.Itoa(lock))
			t.Setenv(handoverFDsEnv, list)
			in, err := Inherit()
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.err)
			assert.Nil(t, in)
			// A child another goroutine started before Inherit marked them
			// holds copies until it exits: a while, not for good.
			for _, addr := range addrs {
				assert.Eventually(t, func() bool {
					ln, err := net.Listen("tcp", addr)
					if err == nil {
						ln.Close()
					}
					return err == nil
				}, 10*time.Second, 10*time.Millisecond, "the handover's socket at %s is left open", addr)
			}
			other, err := os.Open(lockPath)
			require.NoError(t, err)
			defer other.Close()
			assert.Eventually(t, func() bool {
				return unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
			}, 10*time.Second, 10*time.Millisecond, "the plan's lock is left held")
			_, err = own.Stat()
			assert.NoError(t, err, "the process's own file is open")
		})
	}
}

// A handover whose host could not quiesce resumes serving on the same
// sockets (the host's own listeners closed): a client connects as
// before, and nothing was executed.
func TestExecHandoverResumesOnTheSameSockets(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	plan, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer plan.Release()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	resumed := make(chan []net.Listener, 1)
	h := &ExecHandover{
		Listeners: []net.Listener{ln},
		Quiesce: func(context.Context) error {
			ln.Close() // the host stops accepting
			return errors.New("a connection did not end")
		},
		Resume: func(lns []net.Listener) error {
			resumed <- lns
			return nil
		},
	}
	err = h.Handover(context.Background(), plan)
	require.ErrorContains(t, err, "a connection did not end")
	lns := <-resumed
	require.Len(t, lns, 1)
	defer lns[0].Close()
	assert.Equal(t, ln.Addr().String(), lns[0].Addr().String())
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err, "the socket stayed open")
	defer conn.Close()
	accepted, err := lns[0].Accept()
	require.NoError(t, err)
	accepted.Close()
}

// A Unix socket's path is kept across the handover: closing the host's
// listener does not unlink it.
func TestExecHandoverKeepsAUnixSocketsPath(t *testing.T) {
	c := newReloadCase(t)
	c.success(t)
	plan, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer plan.Release()
	path := t.TempDir() + "/s"
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	h := &ExecHandover{
		Listeners: []net.Listener{ln},
		Quiesce:   func(context.Context) error { ln.Close(); return errors.New("stop here") },
		Resume: func(lns []net.Listener) error {
			for _, l := range lns {
				l.Close()
			}
			return nil
		},
	}
	require.Error(t, h.Handover(context.Background(), plan))
	_, err = os.Stat(path)
	assert.NoError(t, err, "the socket's path is still there")
}

// inheritChildEnv makes the test binary a process a service manager
// started with descriptors: it reports what Inherit returned (see
// inheritChild), with the value as what to do.
const inheritChildEnv = "RUNTIMEGUARD_TEST_INHERIT_CHILD"

func init() {
	children[inheritChildEnv] = inheritChild
	children[keptCopyChildEnv] = keptCopyChild
}

// keptCopyChildEnv runs the test binary as keptCopyChild.
const keptCopyChildEnv = "RUNTIMEGUARD_TEST_KEPT_COPY_CHILD"

// keptCopyChild is a host that opened a file and closed its standard
// input, then copies the file's descriptor for an exec to keep: it prints
// the copy's number.
func keptCopyChild(string) int {
	f, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	os.Stdin.Close()
	fd, err := keptCopy(f.Fd())
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	fmt.Println("copy", fd, "close-on-exec", err != nil || flags&unix.FD_CLOEXEC != 0)
	return 0
}

// An exec handover's copies are numbered 3 or more, the only numbers the
// new image's Inherit takes, and kept across the exec (not close-on-exec),
// even in a host that closed its standard input, whose number a plain dup
// hands out first.
func TestExecHandoverCopiesAreNumberedPastTheStandardStreams(t *testing.T) {
	out, err := gittest.Self(nil, keptCopyChildEnv+"=1").Output()
	require.NoError(t, err, "%s", out)
	var fd int
	var cloexec bool
	_, err = fmt.Sscanf(string(out), "copy %d close-on-exec %t", &fd, &cloexec)
	require.NoError(t, err, "%q", out)
	assert.GreaterOrEqual(t, fd, 3)
	assert.False(t, cloexec)
}

// inheritChild is the process a service manager started: "serve" reports
// and serves what Inherit took; "overcount" opens a log file of its own
// first, then reports Inherit's error and whether its log and the
// descriptor it was given are still open.
func inheritChild(mode string) int {
	var log *os.File
	if mode == "overcount" {
		var err error
		if log, err = os.OpenFile(filepath.Join(os.Getenv("RUNTIMEGUARD_TEST_DIR"), "host.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	if mode == "overcount" {
		// A count that reaches the log file, past the Go runtime's own
		// descriptors (its poller's) opened since the exec.
		os.Setenv("LISTEN_FDS", strconv.Itoa(int(log.Fd())-2))
	}
	in, err := Inherit()
	if mode == "overcount" {
		fmt.Println("inherit", in == nil, err)
		_, werr := fmt.Fprintln(log, "the host's log, written after Inherit")
		fmt.Println("log write", werr)
		_, ferr := unix.FcntlInt(3, unix.F_GETFD, 0)
		fmt.Println("descriptor 3 open", ferr == nil)
		fmt.Println("poller", pollerWorks())
		return 0
	}
	if err != nil || in == nil {
		fmt.Println("error", err)
		return 1
	}
	if mode == "names" {
		for _, l := range in.Listeners {
			fmt.Println("listener", in.Name(l))
		}
		for _, c := range in.PacketConns {
			fmt.Println("packet", in.Name(c))
		}
		for _, f := range in.Files {
			fmt.Println("file", in.Name(f))
		}
		fmt.Printf("other %q\n", in.Name(os.Stdout))
		return 0
	}
	for _, l := range in.Listeners {
		fmt.Println("listener", l.Addr().Network(), l.Addr())
	}
	for _, c := range in.PacketConns {
		fmt.Println("packet", c.LocalAddr().Network(), c.LocalAddr())
	}
	for _, f := range in.Files {
		flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
		fmt.Println("file", f.Name(), err == nil && flags&unix.FD_CLOEXEC != 0)
	}
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		if _, ok := os.LookupEnv(v); ok {
			fmt.Println("left", v)
		}
	}
	fmt.Println("serving")
	// Each served once: the stream listener answers a connection, the
	// datagram socket a datagram, and the FIFO is read to its end.
	c, err := in.Listeners[0].Accept()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Fprintln(c, "stream")
	c.Close()
	buf := make([]byte, 64)
	n, from, err := in.PacketConns[0].ReadFrom(buf)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if _, err := in.PacketConns[0].WriteTo(append([]byte("datagram "), buf[:n]...), from); err != nil {
		fmt.Println("error", err)
		return 1
	}
	data, err := io.ReadAll(in.Files[0])
	fmt.Printf("fifo %q %v\n", data, err)
	return 0
}

// pollerWorks reports the error of a round trip through the Go
// runtime's poller (a connection to a listener of this process, each
// step with a deadline), nil when it works.
func pollerWorks() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			fmt.Fprintln(c, "pong")
			c.Close()
		}
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

// activate starts the test binary as a service manager starts a unit:
// files passed from descriptor 3 on, LISTEN_PID naming the process (a
// shell sets it to its own and execs, as systemd does between fork and
// exec), and env besides.
func activate(t *testing.T, mode string, files []*os.File, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := gittest.Self(nil, append(env, inheritChildEnv+"="+mode)...)
	cmd.Path = "/bin/sh"
	cmd.Args = []string{"sh", "-c", `LISTEN_PID=$$ exec "$0"`, os.Args[0]}
	cmd.ExtraFiles = files
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// Socket activation passing a stream socket, a datagram socket (HTTP/3
// beside HTTP), a FIFO and a file: Inherit takes them all, each as the
// host can serve it, named, close-on-exec, and the variables are gone.
func TestInheritTakesEveryKind(t *testing.T) {
	dir := tempDir(t)
	ln, lf := gittest.ListenerFile(t)
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer udp.Close()
	uf, err := udp.File()
	require.NoError(t, err)
	defer uf.Close()
	fifo := filepath.Join(dir, "fifo")
	gittest.Mkfifo(t, fifo)
	ff, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer ff.Close()
	plain := filepath.Join(dir, "state")
	writeFile(t, plain, "")
	pf, err := os.Open(plain)
	require.NoError(t, err)
	defer pf.Close()
	require.NoError(t, unix.SetNonblock(int(ff.Fd()), false)) // the child reads to the end
	// What the FIFO holds waits there for the child: it is kept while a
	// reader holds it open.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = w.WriteString("event\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())

	cmd, sc := activate(t, "serve", []*os.File{lf, uf, ff, pf}, "LISTEN_FDS=4", "LISTEN_FDNAMES=http:quic:events:state")
	var report []string
	for sc.Scan() && sc.Text() != "serving" {
		report = append(report, sc.Text())
	}
	require.Equal(t, []string{
		"listener tcp " + ln.Addr().String(),
		"packet udp " + udp.LocalAddr().String(),
		"file events true",
		"file state true",
	}, report)

	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	require.NoError(t, err)
	assert.Equal(t, "stream\n", line)
	uc, err := net.Dial("udp", udp.LocalAddr().String())
	require.NoError(t, err)
	defer uc.Close()
	_, err = uc.Write([]byte("ping"))
	require.NoError(t, err)
	buf := make([]byte, 64)
	n, err := uc.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "datagram ping", string(buf[:n]))
	require.True(t, sc.Scan())
	assert.Equal(t, `fifo "event\n" <nil>`, sc.Text())
	require.NoError(t, cmd.Wait())
}

// Every descriptor a service manager passes keeps its LISTEN_FDNAMES name
// (a socket unit's FileDescriptorName=), whatever kind Inherit hands it
// back as: a listener, a datagram socket, a file; "unknown" without the
// variable, as sd_listen_fds_with_names(3) says it.
func TestInheritNamesEveryDescriptor(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want []string
	}{
		{[]string{"LISTEN_FDS=3", "LISTEN_FDNAMES=http:quic:state"}, []string{"listener http", "packet quic", "file state", `other ""`}},
		{[]string{"LISTEN_FDS=3"}, []string{"listener unknown", "packet unknown", "file unknown", `other ""`}},
	} {
		_, lf := gittest.ListenerFile(t)
		udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		require.NoError(t, err)
		defer udp.Close()
		uf, err := udp.File()
		require.NoError(t, err)
		defer uf.Close()
		plain := filepath.Join(tempDir(t), "state")
		writeFile(t, plain, "")
		pf, err := os.Open(plain)
		require.NoError(t, err)
		defer pf.Close()
		cmd, sc := activate(t, "names", []*os.File{lf, uf, pf}, tc.env...)
		var report []string
		for sc.Scan() {
			report = append(report, sc.Text())
		}
		require.NoError(t, cmd.Wait())
		assert.Equal(t, tc.want, report, "%q", tc.env)
	}
}

// A LISTEN_FDS that counts past what was passed must not make Inherit
// take descriptors it was never given: the host's log file, opened
// before, is still written after it, and the one it was given is left
// open for the host; Inherit says why.
func TestInheritTakesNothingItWasNotGiven(t *testing.T) {
	dir := tempDir(t)
	_, lf := gittest.ListenerFile(t)
	cmd, sc := activate(t, "overcount", []*os.File{lf}, "LISTEN_FDS=1", "RUNTIMEGUARD_TEST_DIR="+dir)
	var report []string
	for sc.Scan() {
		report = append(report, sc.Text())
	}
	require.NoError(t, cmd.Wait())
	require.Len(t, report, 4, "%q", report)
	assert.True(t, strings.HasPrefix(report[0], "inherit true runtimeguard: inherit: LISTEN_FDS="), report[0])
	assert.Contains(t, report[0], ": descriptor 4 is marked close-on-exec", report[0])
	assert.Contains(t, report[0], "not passed to this process")
	assert.Equal(t, "log write <nil>", report[1], "the host's log file was closed")
	assert.Equal(t, "descriptor 3 open true", report[2], "a descriptor given was closed")
	assert.Equal(t, "poller <nil>", report[3], "the Go runtime's own descriptors were closed")
	data, err := os.ReadFile(filepath.Join(dir, "host.log"))
	require.NoError(t, err)
	assert.Equal(t, "the host's log, written after Inherit\n", string(data))
}

// LISTEN_PIDFDID, where this kernel tells a process's pidfd ID, names the
// process the descriptors are for: another's (a reused process ID) is
// none, and a malformed one an error.
func TestInheritChecksThePidfdID(t *testing.T) {
	clearHandoverEnv(t)
	me := strconv.Itoa(os.Getpid())
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "LISTEN_PIDFDID"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	t.Setenv("LISTEN_PID", me)
	t.Setenv("LISTEN_FDS", "1")
	t.Setenv("LISTEN_PIDFDID", "x")
	in, err := Inherit()
	assert.Error(t, err)
	assert.Nil(t, in)
	_, left := os.LookupEnv("LISTEN_PIDFDID")
	assert.False(t, left, "unset whatever was found")
}

// An exec that fails says which program it could not execute, and the
// host resumes on the same sockets. (An environment variable longer than
// Linux's MAX_ARG_STRLEN makes execve fail with E2BIG before it replaces
// anything.)
func TestExecHandoverNamesTheProgramItCouldNotExecute(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the limits of exec on Linux")
	}
	c := newReloadCase(t)
	c.success(t)
	plan, err := c.g.PlanReload(context.Background())
	require.NoError(t, err)
	defer plan.Release()
	exe, err := os.Executable()
	require.NoError(t, err)
	t.Setenv("RUNTIMEGUARD_TEST_TOO_LONG", strings.Repeat("x", 4<<20))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	resumed := make(chan []net.Listener, 1)
	h := &ExecHandover{
		Listeners: []net.Listener{ln},
		Quiesce:   func(context.Context) error { return ln.Close() },
		Resume: func(lns []net.Listener) error {
			resumed <- lns
			return nil
		},
	}
	err = h.Handover(context.Background(), plan)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exec "+exe+": ")
	assert.True(t, errors.Is(err, errTooBig), "%v", err)
	lns := <-resumed
	require.Len(t, lns, 1)
	lns[0].Close()
}

// errTooBig is execve's error for arguments and environment beyond its
// limits.
var errTooBig = syscall.E2BIG
