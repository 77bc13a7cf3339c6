//go:build unix

package updater

import (
	"fmt"
	"io"
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
)

// recoveryNames are the Hermes updater's recovery markers.
var recoveryNames = []string{incomplete, lazy}

// mkfifo makes a FIFO at path.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, unix.Mkfifo(path, 0o644))
}

// The descriptor check, reached when the path changes between the lstat and
// the open: the open itself must not block on a FIFO.
func TestSafeOpenRejectsFIFODescriptor(t *testing.T) {
	fifo := filepath.Join(tempDir(t), "fifo")
	mkfifo(t, fifo)
	fd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	require.NoError(t, err, "a non-blocking open of a FIFO returns at once")
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	assert.NotEqual(t, uint32(unix.S_IFREG), uint32(st.Mode)&unix.S_IFMT)
	unix.Close(fd)
}

func TestRecoveryMarkerErrorIsUnknown(t *testing.T) {
	dir := tempDir(t)
	notDir := filepath.Join(dir, "file")
	writeFile(t, notDir, "")
	// A root that is a file: looking inside it fails with ENOTDIR, not
	// "does not exist".
	_, err := RecoveryMarkers([]string{dir, notDir}, recoveryNames)
	assert.ErrorIs(t, err, syscall.ENOTDIR, "a root that is a file cannot be searched")
	assert.ErrorContains(t, err, notDir, "the error names the root")
	// Found before the error, still not searched.
	writeFile(t, filepath.Join(dir, incomplete), "")
	present, err := RecoveryMarkers([]string{dir, notDir}, recoveryNames)
	assert.Error(t, err)
	assert.Equal(t, []string{filepath.Join(dir, incomplete)}, present)
	present, err = RecoveryMarkers([]string{dir}, recoveryNames)
	assert.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, incomplete)}, present)
}

// readWithin classifies path in a goroutine and fails the test if that does
// not return: a blocked read would otherwise hang the whole run.
func readWithin(t *testing.T, path string) Life {
	t.Helper()
	done := make(chan Life, 1)
	go func() { done <- readMarker(path) }()
	select {
	case s := <-done:
		return s
	case <-time.After(30 * time.Second):
		t.Fatalf("readMarker(%q) blocked", path)
		return NoUpdate
	}
}

func TestFIFOMarkerIsUnknownWithoutBlocking(t *testing.T) {
	fifo := filepath.Join(tempDir(t), markerName)
	mkfifo(t, fifo)
	assert.Equal(t, Unsure, readWithin(t, fifo), "no writer")

	// A writer holds it open, with data waiting.
	w, err := unix.Open(fifo, unix.O_RDWR|unix.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer unix.Close(w)
	_, err = unix.Write(w, []byte("1\n1\n"))
	require.NoError(t, err)
	assert.Equal(t, Unsure, readWithin(t, fifo), "a writer holds it open")
}

func TestSymlinkMarkerIsNotFollowed(t *testing.T) {
	dir := tempDir(t)
	target := filepath.Join(dir, "real-marker")
	writeMarker(t, target, os.Getpid(), time.Now())
	require.Equal(t, Live, readMarker(target))
	link := filepath.Join(dir, markerName)
	require.NoError(t, os.Symlink(target, link))
	assert.Equal(t, Unsure, readMarker(link))
	dangling := filepath.Join(dir, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(dir, "missing"), dangling))
	assert.Equal(t, Unsure, readMarker(dangling))
}

func TestDeviceAndSocketMarkersAreUnknown(t *testing.T) {
	assert.Equal(t, Unsure, readMarker(os.DevNull))
	sock := filepath.Join(tempDir(t), "s")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrUnix{Name: sock}))
	assert.Equal(t, Unsure, readMarker(sock))
}

func TestProbeProcess(t *testing.T) {
	self := ProbeProcess(int64(os.Getpid()))
	assert.Equal(t, ProcessAlive, self.State)
	cmd := exec.Command("git", "--version")
	require.NoError(t, cmd.Run())
	assert.Equal(t, ProcessGone, ProbeProcess(int64(cmd.Process.Pid)).State)
	// Values kill(2) would truncate are never asked about.
	assert.Equal(t, LivenessUnknown, ProbeProcess(1<<32+int64(os.Getpid())).State)
	assert.Equal(t, LivenessUnknown, ProbeProcess(-1).State)
}

// A marker naming a live child is stale when the child started more than
// pidReuseSlack after the marker's time (the child holds a reused process
// ID), and active when it started before, or after by less than the slack.
func TestReusedPIDMarker(t *testing.T) {
	if start, _ := processStart(int64(os.Getpid())); start.IsZero() {
		t.Skip("this platform does not tell when a process started")
	}
	before := time.Now()
	cmd := exec.Command("sleep", "30")
	require.NoError(t, cmd.Start())
	after := time.Now()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The child started between before and after.
	cases := []struct {
		name    string
		written time.Time
		want    Life
	}{
		{"written 2.3 s before the child started", before.Add(-2300 * time.Millisecond), Ended},
		{"written 1.5 s before the child started", before.Add(-1500 * time.Millisecond), Ended},
		{"written 0.5 s before Start returned: within the slack", after.Add(-500 * time.Millisecond), Live},
		{"written after the child started", after, Live},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), markerName)
			writeMarker(t, path, cmd.Process.Pid, tc.written)
			got := readMarker(path)
			assert.Equal(t, tc.want, got, "readMarker(%q) = %q, want %q (marker time %v before Start was called, which took %v)",
				path, got, tc.want, before.Sub(tc.written), after.Sub(before))
		})
	}
}

// permissionChildEnv names the directory a child test process classifies
// after dropping root: see TestPermissionCases.
const permissionChildEnv = "RUNTIMEGUARD_PERMISSION_CHILD"

func init() {
	children[permissionChildEnv] = func(dir string) int {
		fmt.Println(classifyPermissionCases(dir))
		return 0
	}
}

// classifyPermissionCases reports, for the layout setupPermissionCases
// makes, what this process can tell of each.
func classifyPermissionCases(dir string) string {
	_, err := RecoveryMarkers([]string{filepath.Join(dir, "locked-root")}, recoveryNames)
	rootsRead := err == nil
	return strings.Join([]string{
		"marker=" + openKind(filepath.Join(dir, "unreadable-marker")),
		"home=" + openKind(filepath.Join(dir, "locked-home", markerName)),
		"root=" + map[bool]string{true: "searched", false: "unknown"}[rootsRead],
		"readable=" + openKind(filepath.Join(dir, "open-home", "readable-marker")),
	}, " ")
}

// openKind is what the safe open of a marker found at path, in a word.
func openKind(path string) string {
	switch _, kind, _ := SafeOpen(path, MaxMarkerBytes); kind {
	case FileRead:
		return "read"
	case FileAbsent:
		return "absent"
	}
	return "unusable"
}

// setupPermissionCases makes an unreadable marker, a home that may not be
// searched, and an install root that may not be searched, plus a readable
// marker as the control.
func setupPermissionCases(t *testing.T, dir string) {
	t.Helper()
	writeMarker(t, filepath.Join(dir, "unreadable-marker"), 1, time.Now())
	require.NoError(t, os.Chmod(filepath.Join(dir, "unreadable-marker"), 0))
	writeMarker(t, filepath.Join(dir, "locked-home", markerName), 1, time.Now())
	require.NoError(t, os.Chmod(filepath.Join(dir, "locked-home"), 0))
	writeFile(t, filepath.Join(dir, "locked-root", incomplete), "")
	require.NoError(t, os.Chmod(filepath.Join(dir, "locked-root"), 0))
	writeMarker(t, filepath.Join(dir, "open-home", "readable-marker"), 1, time.Now().Add(-48*time.Hour))
	t.Cleanup(func() {
		for _, p := range []string{"locked-home", "locked-root"} {
			_ = os.Chmod(filepath.Join(dir, p), 0o755)
		}
	})
}

// Unreadable markers and homes are unusable (they prove nothing), and
// install roots that cannot be searched unknown. As root every
// file is readable, so the cases run in a child that drops to nobody.
func TestPermissionCases(t *testing.T) {
	want := "marker=unusable home=unusable root=unknown readable=read"
	if os.Geteuid() != 0 {
		dir := tempDir(t)
		setupPermissionCases(t, dir)
		assert.Equal(t, want, classifyPermissionCases(dir))
		return
	}
	// Everything the child needs must be reachable by nobody: a copy of
	// this test binary and the case directory, under world-searchable
	// directories.
	base, err := os.MkdirTemp("", "runtimeguard-perm-")
	require.NoError(t, err)
	defer os.RemoveAll(base)
	require.NoError(t, os.Chmod(base, 0o755))
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(base, "child.test")
	copyFile(t, exe, bin, 0o755)
	dir := filepath.Join(base, "cases")
	require.NoError(t, os.Mkdir(dir, 0o755))
	setupPermissionCases(t, dir)

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), permissionChildEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	// The answer on stdout alone: the child's stderr has what the
	// toolchain says of it, such as a coverage directory (-cover) that
	// nobody cannot write.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("cannot run a child process as uid 65534 here: %v: %s%s", err, out, stderr.String())
	}
	assert.Equal(t, want, strings.TrimSpace(string(out)), "stderr: %s", stderr.String())
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}

// Every directory the updater's files are listed in may be something
// else: a FIFO where the receipts' history or a marker's directory would
// be is an answer at once, never a listing that waits for a writer of the
// FIFO. Where the history would be, a FIFO or a file holds no receipts;
// where a marker's directory would be, it is why the listing failed.
func TestListingsOfAFIFOReturn(t *testing.T) {
	base := tempDir(t)
	fifo, file := filepath.Join(base, "fifo"), filepath.Join(base, "file")
	mkfifo(t, fifo)
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	receipts := func(dir string) func() string {
		return func() string {
			return ListReceipts([]ReceiptSource{{History: filepath.Join(dir, ReceiptHistoryPattern)}}).Problem
		}
	}
	for _, tc := range []struct {
		name    string
		list    func() string
		problem string // what the answer contains; "" for none
	}{
		{"the receipts' history is a FIFO", receipts(fifo), ""},
		{"the receipts' history is a file", receipts(file), ""},
		{"a marker's directory is a FIFO", func() string {
			_, why := ListArtifacts(fifo, ".update.lock")
			return why
		}, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan string, 1)
			go func() { done <- tc.list() }()
			select {
			case why := <-done:
				if tc.problem == "" {
					assert.Empty(t, why)
				} else {
					assert.Contains(t, why, tc.problem)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the listing waits on a FIFO")
			}
		})
	}
}
