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
)

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
	_, rootsRead := RecoveryMarkers([]string{filepath.Join(dir, "locked-root")}, recoveryNames)
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
