//go:build unix

package systemd

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// childEnv makes the test binary the process a service manager started
// with sockets: it reports what ListenFiles returned, and serves one
// connection on each socket.
const childEnv = "SYSTEMD_TEST_LISTEN_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(listenChild())
	}
	os.Exit(m.Run())
}

// listenChild prints each socket's name and close-on-exec flag, the
// variables left, then answers one connection on each socket with its
// name.
func listenChild() int {
	files, err := ListenFiles()
	if err != nil {
		fmt.Println("error", err)
		flags, err := unix.FcntlInt(listenFDsStart, unix.F_GETFD, 0)
		fmt.Println("descriptor 3 open", err == nil, "close-on-exec", err == nil && flags&unix.FD_CLOEXEC != 0)
		return 1
	}
	for _, f := range files {
		flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
		fmt.Println("socket", f.Name(), err == nil && flags&unix.FD_CLOEXEC != 0)
	}
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		if _, ok := os.LookupEnv(v); ok {
			fmt.Println("left", v)
		}
	}
	fmt.Println("serving")
	for _, f := range files {
		ln, err := net.FileListener(f)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		c, err := ln.Accept()
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Fprintln(c, f.Name())
		c.Close()
	}
	return 0
}

// A manager's sockets, passed from descriptor 3 on to the process whose
// ID LISTEN_PID names (a shell sets it to its own and execs, as systemd
// does between fork and exec), are named, made close-on-exec, served,
// and the variables are gone.
func TestListenFiles(t *testing.T) {
	var lns []*net.TCPListener
	var files []*os.File
	for range 2 {
		ln, f := gittest.ListenerFile(t)
		lns, files = append(lns, ln), append(files, f)
	}
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ exec "$0"`, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", "LISTEN_FDS=2", "LISTEN_FDNAMES=http:admin")
	cmd.ExtraFiles = files
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Wait()
	sc := bufio.NewScanner(out)
	var report []string
	for sc.Scan() && sc.Text() != "serving" {
		report = append(report, sc.Text())
	}
	assert.Equal(t, []string{"socket http true", "socket admin true"}, report)
	for i, ln := range lns {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		require.NoError(t, err)
		assert.Equal(t, []string{"http", "admin"}[i]+"\n", line)
	}
	require.NoError(t, cmd.Wait())
}

// A LISTEN_FDNAMES that is set but empty holds no names, as
// sd_listen_fds_with_names splits it: with a socket passed, that is fewer
// names than descriptors, an error, not a socket named "" (which
// Inherited.Name says of what was not passed). Every descriptor passed
// the check, so each is marked close-on-exec, as sd_listen_fds marks them
// before sd_listen_fds_with_names compares the count of names, and left
// open: no child inherits it.
func TestListenFilesEmptyNames(t *testing.T) {
	_, f := gittest.ListenerFile(t)
	// A child that took the socket would wait to serve it: it is ended.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `LISTEN_PID=$$ exec "$0"`, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", "LISTEN_FDS=1", "LISTEN_FDNAMES=")
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.Output()
	assert.Error(t, err, "the child serves nothing")
	assert.Contains(t, string(out), `error LISTEN_FDNAMES="" names 0 descriptors, LISTEN_FDS=1`)
	assert.Contains(t, string(out), "descriptor 3 open true close-on-exec true", "the socket passed is left for a child to inherit")
}

// Variables for another process, or none, are no sockets; malformed ones
// are an error. Either way they are unset.
func TestListenFilesVariables(t *testing.T) {
	me := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		env     []string
		wantErr bool
	}{
		{nil, false},
		{[]string{"LISTEN_PID", strconv.Itoa(os.Getppid()), "LISTEN_FDS", "1"}, false},
		{[]string{"LISTEN_PID", me}, false},
		{[]string{"LISTEN_PID", "x", "LISTEN_FDS", "1"}, true},
		{[]string{"LISTEN_PID", me, "LISTEN_FDS", "0"}, true},
		{[]string{"LISTEN_PID", me, "LISTEN_FDS", "two"}, true},
		{[]string{"LISTEN_PID", me, "LISTEN_FDS", "2", "LISTEN_FDNAMES", "http"}, true},
		{[]string{"LISTEN_PID", me, "LISTEN_FDS", "2", "LISTEN_FDNAMES", "a:b:c"}, true},
	} {
		for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
			t.Setenv(v, "")
			os.Unsetenv(v)
		}
		for i := 0; i < len(tc.env); i += 2 {
			t.Setenv(tc.env[i], tc.env[i+1])
		}
		files, err := ListenFiles()
		assert.Nil(t, files, "%v", tc.env)
		if tc.wantErr {
			assert.Error(t, err, "%v", tc.env)
		} else {
			assert.NoError(t, err, "%v", tc.env)
		}
		for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
			_, ok := os.LookupEnv(v)
			assert.False(t, ok, "%s left set after %v", v, strings.Join(tc.env, " "))
		}
	}
}
