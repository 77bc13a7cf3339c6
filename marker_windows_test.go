//go:build windows

package runtimeguard

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/windows"
)

func TestWindowsMarkerKinds(t *testing.T) {
	dir := tempDir(t)
	regular := filepath.Join(dir, MarkerName)
	writeMarker(t, regular, os.Getpid(), time.Now())
	assert.Equal(t, MarkerActive, ReadUpdateMarker(regular), "a regular file")
	assert.Equal(t, MarkerAbsent, ReadUpdateMarker(filepath.Join(dir, "missing")))
	assert.Equal(t, MarkerAbsent, ReadUpdateMarker(filepath.Join(dir, "no-dir", "missing")))
	assert.Equal(t, MarkerUnknown, ReadUpdateMarker(dir), "a directory")
	assert.Equal(t, MarkerUnknown, ReadUpdateMarker(`\\.\NUL`), "a device")
	assert.Equal(t, MarkerUnknown, ReadUpdateMarker(filepath.Join(dir, "NUL")), "a reserved device name")

	big := filepath.Join(dir, "big")
	writeFile(t, big, fmt.Sprintf("%d\n%d\n", os.Getpid(), time.Now().Unix())+strings.Repeat("x", MaxMarkerBytes))
	assert.Equal(t, MarkerUnknown, ReadUpdateMarker(big), "over the size cap")
}

func TestWindowsSymlinkMarkerIsNotFollowed(t *testing.T) {
	dir := tempDir(t)
	target := filepath.Join(dir, "real-marker")
	writeMarker(t, target, os.Getpid(), time.Now())
	link := filepath.Join(dir, MarkerName)
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("this host cannot make a symbolic link: %v", err)
	}
	if _, err := os.Lstat(link); err != nil {
		// Wine 8 reports success from CreateSymbolicLink but makes nothing.
		t.Skipf("this host reported a symbolic link it did not make: %v", err)
	}
	assert.Equal(t, MarkerUnknown, ReadUpdateMarker(link))
}

func TestWindowsProbeProcess(t *testing.T) {
	self := probeProcess(os.Getpid())
	assert.Equal(t, processAlive, self.state)
	assert.False(t, self.start.IsZero(), "GetProcessTimes gave no start time")
	assert.True(t, self.start.Before(time.Now().Add(time.Second)))

	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), waitChildEnv+"=1")
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	pid := child.Process.Pid
	assert.Equal(t, processAlive, probeProcess(pid).state, "a running child")
	require.NoError(t, stdin.Close())
	require.NoError(t, child.Wait())
	assert.Equal(t, processGone, probeProcess(pid).state, "an exited child")

	assert.Equal(t, livenessUnknown, probeProcess(int(maxPID)+1).state)
	assert.Equal(t, livenessUnknown, probeProcess(0).state)
}

// A process that exited with 259 (STILL_ACTIVE) is gone: liveness comes from
// waiting on the process, not from its exit code.
func TestWindowsExitCode259IsGone(t *testing.T) {
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), exitChildEnv+"=259")
	require.NoError(t, child.Start())
	defer func() { _ = child.Wait() }()
	// A handle of our own keeps the exited process's object, and its id,
	// alive while it is probed.
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(child.Process.Pid))
	require.NoError(t, err)
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, 30000)
	require.NoError(t, err)
	require.Equal(t, uint32(windows.WAIT_OBJECT_0), ev, "the child did not exit")
	var code uint32
	require.NoError(t, windows.GetExitCodeProcess(h, &code))
	require.Equal(t, uint32(259), code)
	assert.Equal(t, processGone, probeProcess(child.Process.Pid).state)
}

// A live process that started after the marker's time did not write it.
func TestWindowsReusedPIDMarkerIsStale(t *testing.T) {
	written := time.Now().Add(-30 * time.Second)
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), waitChildEnv+"=1")
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	defer func() { _ = stdin.Close(); _ = child.Wait() }()

	path := filepath.Join(tempDir(t), MarkerName)
	writeMarker(t, path, child.Process.Pid, written)
	assert.Equal(t, MarkerStale, ReadUpdateMarker(path))
	writeMarker(t, path, child.Process.Pid, time.Now())
	assert.Equal(t, MarkerActive, ReadUpdateMarker(path))
}

// checkoutEnv names a checkout the host made for the Windows tests (under
// Wine, where there is no git binary): "DIR;REVISION".
const checkoutEnv = "RUNTIMEGUARD_TEST_CHECKOUT"

// TestWindowsGuardOnCheckout reads a real checkout through Windows paths,
// binds to it, and sees a ref move through the stat fast path.
func TestWindowsGuardOnCheckout(t *testing.T) {
	var src, rev string
	if v := os.Getenv(checkoutEnv); v != "" {
		parts := strings.SplitN(v, ";", 2)
		require.Len(t, parts, 2, "%s=%q", checkoutEnv, v)
		// Work on a copy: the test moves the branch.
		src, rev = filepath.Join(tempDir(t), "agent"), parts[1]
		require.NoError(t, os.CopyFS(src, os.DirFS(parts[0])))
	} else if _, err := exec.LookPath("git"); err == nil {
		src = filepath.Join(tempDir(t), "agent")
		_, rev = agentRepo(t, src)
	} else {
		t.Skipf("no git binary, and %s names no checkout", checkoutEnv)
	}
	module := filepath.Join(src, "run_agent.py")
	got, err := ReadRevision(src, module)
	require.NoError(t, err)
	require.Equal(t, rev, got)

	e := testEnv(nil)
	e.now = func() time.Time { return time.Now().Add(time.Hour) } // every stamp settled
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(t)}, e)
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())
	require.True(t, trusted(g), "the snapshot of a settled checkout is trusted")
	require.NoError(t, g.EnsureCurrent())

	moved := strings.Repeat("7", 40)
	writeFile(t, filepath.Join(src, ".git", "refs", "heads", "main"), moved+"\n")
	var se *StaleError
	require.ErrorAs(t, g.EnsureCurrent(), &se)
	assert.Equal(t, moved, se.Current)
	assert.Equal(t, UpdateUnverified, se.State)
}
