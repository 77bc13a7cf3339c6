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

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// recoveryNames are the Hermes updater's recovery markers.
var recoveryNames = []string{incomplete, lazy}

// A FIFO at the path is unusable and never waited on: SafeOpen refuses it
// on its lstat, and where a FIFO is swapped in after the lstat, the open
// its descriptor check relies on returns at once (the open SafeOpen makes,
// on a FIFO no writer holds).
func TestSafeOpenRejectsFIFODescriptor(t *testing.T) {
	fifo := filepath.Join(tempDir(t), "fifo")
	gittest.Mkfifo(t, fifo)
	done := make(chan FileKind, 1)
	go func() { _, kind, _ := SafeOpen(fifo, MaxMarkerBytes); done <- kind }()
	select {
	case kind := <-done:
		assert.Equal(t, FileUnusable, kind, "SafeOpen of a FIFO")
	case <-time.After(30 * time.Second):
		t.Fatalf("SafeOpen(%q) blocked", fifo)
	}
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
	gittest.WriteMarker(t, filepath.Join(dir, "unreadable-marker"), 1, time.Now())
	require.NoError(t, os.Chmod(filepath.Join(dir, "unreadable-marker"), 0))
	gittest.WriteMarker(t, filepath.Join(dir, "locked-home", markerName), 1, time.Now())
	require.NoError(t, os.Chmod(filepath.Join(dir, "locked-home"), 0))
	writeFile(t, filepath.Join(dir, "locked-root", incomplete), "")
	require.NoError(t, os.Chmod(filepath.Join(dir, "locked-root"), 0))
	gittest.WriteMarker(t, filepath.Join(dir, "open-home", "readable-marker"), 1, time.Now().Add(-48*time.Hour))
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
	gittest.Mkfifo(t, fifo)
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
