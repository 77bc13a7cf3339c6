//go:build linux

package runtimeguard

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

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
