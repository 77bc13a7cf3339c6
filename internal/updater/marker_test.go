package updater

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadUpdateMarker(t *testing.T) {
	now := time.Now()
	old := now.Add(-maxAge - time.Minute)
	pid := os.Getpid()
	cases := []struct {
		name string
		body string // "" with absent true: no file
		want MarkerState
	}{
		{"live process", fmt.Sprintf("%d\n%d\n", pid, now.Unix()), Active},
		{"fractional time", fmt.Sprintf("%d\n%.6f\n", pid, float64(now.UnixNano())/1e9), Active},
		{"no final newline", fmt.Sprintf("%d\n%d", pid, now.Unix()), Active},
		{"crlf lines", fmt.Sprintf("%d\r\n%d\r\n", pid, now.Unix()), Active},
		{"extra lines ignored", fmt.Sprintf("%d\n%d\nupdater v2\n", pid, now.Unix()), Active},
		{"padded values", fmt.Sprintf("  %d \n %d \n", pid, now.Unix()), Active},
		{"over age", fmt.Sprintf("%d\n%d\n", pid, now.Add(-maxAge-time.Minute).Unix()), Stale},
		{"over age beats liveness", fmt.Sprintf("1\n%d\n", now.Add(-48*time.Hour).Unix()), Stale},
		{"one line", fmt.Sprintf("%d\n", pid), Unknown},
		{"empty", "", Unknown},
		{"pid zero", fmt.Sprintf("0\n%d\n", now.Unix()), Unknown},
		{"negative pid", fmt.Sprintf("-5\n%d\n", now.Unix()), Unknown},
		{"pid past the platform limit", fmt.Sprintf("%d\n%d\n", int64(maxPID)+1, now.Unix()), Unknown},
		{"pid 2^100", fmt.Sprintf("1267650600228229401496703205376\n%d\n", now.Unix()), Unknown},
		{"pid zero over age", fmt.Sprintf("0\n%d\n", old.Unix()), Unknown},
		{"negative pid over age", fmt.Sprintf("-5\n%d\n", old.Unix()), Unknown},
		{"pid past the platform limit over age", fmt.Sprintf("%d\n%d\n", int64(maxPID)+1, old.Unix()), Stale},
		{"pid 2^100 over age", fmt.Sprintf("1267650600228229401496703205376\n%d\n", old.Unix()), Stale},
		{"pid 2^100 in the future", fmt.Sprintf("1267650600228229401496703205376\n%d\n", now.Add(time.Hour).Unix()), Unknown},
		{"pid over int()'s digit limit, over age", fmt.Sprintf("%s\n%d\n", strings.Repeat("1", 4301), old.Unix()), Unknown},
		{"pid not a number", fmt.Sprintf("12a\n%d\n", now.Unix()), Unknown},
		{"time not a number", fmt.Sprintf("%d\nyesterday\n", pid), Unknown},
		{"hex float time", fmt.Sprintf("%d\n%s\n", pid, strconv.FormatFloat(float64(now.Unix()), 'x', -1, 64)), Unknown},
		{"hex pid", fmt.Sprintf("%#x\n%d\n", pid, now.Unix()), Unknown},
		{"underscores", fmt.Sprintf("%s\n%s.0_0\n", underscored(strconv.Itoa(pid)), underscored(strconv.FormatInt(now.Unix(), 10))), Active},
		{"doubled underscore", fmt.Sprintf("%d\n1__%d\n", pid, now.Unix()), Unknown},
		{"arabic-indic digits", fmt.Sprintf("%s\n%s\n", arabicIndic(strconv.Itoa(pid)), arabicIndic(strconv.FormatInt(now.Unix(), 10))), Active},
		{"unicode spaces", fmt.Sprintf("\u3000%d\u00a0\n\u2003%d\u0085\n", pid, now.Unix()), Active},
		{"exponent time", fmt.Sprintf("%d\n%.9e\n", pid, float64(now.Unix())), Active},
		{"overflowing time", fmt.Sprintf("%d\n1e400\n", pid), Unknown},
		{"infinite time", fmt.Sprintf("%d\ninf\n", pid), Unknown},
		{"negative infinite time", fmt.Sprintf("%d\n-inf\n", pid), Unknown},
		{"nan time", fmt.Sprintf("%d\nNaN\n", pid), Unknown},
		{"future time", fmt.Sprintf("%d\n%d\n", pid, now.Add(time.Hour).Unix()), Unknown},
		{"not utf-8", "\xff\xfe\n\x00\n", Unknown},
		{"at the size cap", padTo(fmt.Sprintf("%d\n%d\n", pid, now.Unix()), MaxMarkerBytes), Active},
		{"one byte over the cap", padTo(fmt.Sprintf("%d\n%d\n", pid, now.Unix()), MaxMarkerBytes+1), Unknown},
		{"far over the cap", padTo(fmt.Sprintf("%d\n%d\n", pid, now.Unix()), MaxMarkerBytes+1024), Unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(tempDir(t), markerName)
			writeFile(t, path, tc.body)
			got := ReadUpdateMarker(path)
			assert.Equal(t, tc.want, got, "ReadUpdateMarker(%q) = %q, want %q", tc.body[:min(len(tc.body), 40)], got, tc.want)
		})
	}
}

// underscored puts an underscore between every two digits of s.
func underscored(s string) string {
	return strings.Join(strings.Split(s, ""), "_")
}

// arabicIndic spells the ASCII digits of s as Arabic-Indic digits.
func arabicIndic(s string) string {
	return strings.Map(func(r rune) rune {
		if '0' <= r && r <= '9' {
			return r - '0' + '\u0660'
		}
		return r
	}, s)
}

// padTo pads a marker body with a third line so that it is n bytes long.
func padTo(body string, n int) string {
	return body + strings.Repeat("x", n-len(body))
}

func TestReadUpdateMarkerAbsent(t *testing.T) {
	dir := tempDir(t)
	assert.Equal(t, Absent, ReadUpdateMarker(filepath.Join(dir, "absent")))
	assert.Equal(t, Absent, ReadUpdateMarker(filepath.Join(dir, "no-dir", "absent")))
}

func TestReadUpdateMarkerDirectory(t *testing.T) {
	dir := tempDir(t)
	assert.Equal(t, Unknown, ReadUpdateMarker(dir))
}

func TestMarkerLiveness(t *testing.T) {
	started := time.Now().Add(-time.Minute)
	cases := []struct {
		name  string
		probe ProcInfo
		want  MarkerState
	}{
		{"alive, start unknown", ProcInfo{State: ProcessAlive}, Active},
		{"alive, started before the marker", ProcInfo{State: ProcessAlive, Start: started.Add(-time.Hour)}, Active},
		{"alive, started within the slack", ProcInfo{State: ProcessAlive, Start: started.Add(pidReuseSlack / 2)}, Active},
		{"alive, started just past the slack", ProcInfo{State: ProcessAlive, Start: started.Add(pidReuseSlack + 10*time.Millisecond)}, Stale},
		{"alive, started after the marker: reused pid", ProcInfo{State: ProcessAlive, Start: started.Add(10 * time.Second)}, Stale},
		{"gone", ProcInfo{State: ProcessGone}, Stale},
		{"cannot tell", ProcInfo{}, Unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), markerName)
			writeMarker(t, path, 4242, started)
			var asked int64
			e := testEnv(func(pid int64) ProcInfo { asked = pid; return tc.probe })
			assert.Equal(t, tc.want, e.ReadMarker(path, maxAge).State)
			assert.Equal(t, int64(4242), asked)
		})
	}
}

func TestMarkerAgeIsCheckedBeforeLiveness(t *testing.T) {
	path := filepath.Join(tempDir(t), markerName)
	writeMarker(t, path, 4242, time.Now().Add(-maxAge-time.Second))
	e := testEnv(func(int64) ProcInfo {
		t.Error("liveness was asked for an over-age marker")
		return ProcInfo{State: ProcessAlive}
	})
	assert.Equal(t, Stale, e.ReadMarker(path, maxAge).State)
	assert.Equal(t, Active, testEnv(func(int64) ProcInfo { return ProcInfo{State: ProcessAlive} }).ReadMarker(path, time.Hour).State)
}

// The checks run in order: a time that is not finite or in the future,
// then a process ID of zero or less, then the age limit, then a process ID
// too large for the platform, and none of them asks about a process. (The
// hermes-webui guard rejects a process ID of zero or less before its age
// rule, and one too large for the platform after it.)
func TestMarkerCheckOrder(t *testing.T) {
	now := time.Unix(1700000000, 0)
	cases := []struct {
		body string
		want MarkerState
	}{
		{"0\n1699999000\n", Unknown},
		{"-1\n1699999000\n", Unknown},
		{"1267650600228229401496703205376\n1699999000\n", Unknown},
		{"0\n1690000000\n", Unknown},
		{"-1\n1690000000\n", Unknown},
		{"-1267650600228229401496703205376\n1690000000\n", Unknown},
		{"1267650600228229401496703205376\n1690000000\n", Stale},
		{"-1267650600228229401496703205376\n-inf\n", Unknown},
		{"0\nnan\n", Unknown},
		{"0\n1700000001\n", Unknown},
	}
	for _, tc := range cases {
		path := filepath.Join(tempDir(t), markerName)
		writeFile(t, path, tc.body)
		e := testEnv(func(pid int64) ProcInfo {
			t.Errorf("liveness was asked for %d of %q", pid, tc.body)
			return ProcInfo{State: ProcessAlive}
		})
		e.Now = func() time.Time { return now }
		got := e.ReadMarker(path, maxAge).State
		assert.Equal(t, tc.want, got, "readMarker(%q) = %q, want %q", tc.body, got, tc.want)
	}
}

// Without a safe open the marker is never opened: a missing marker is
// absent, and any present one, valid or not, unknown.
func TestNoSafeOpenNeverOpensMarker(t *testing.T) {
	dir := tempDir(t)
	present := filepath.Join(dir, "present-marker")
	writeMarker(t, present, os.Getpid(), time.Now())
	e := testEnv(func(int64) ProcInfo {
		t.Error("liveness was asked without reading the marker")
		return ProcInfo{}
	})
	e.Open = lstatOnly
	assert.Equal(t, Unknown, e.ReadMarker(present, maxAge).State)
	assert.Equal(t, Absent, e.ReadMarker(filepath.Join(dir, "missing"), maxAge).State)
	assert.Equal(t, Unknown, e.ReadMarker(dir, maxAge).State)
}

func TestInstallRoots(t *testing.T) {
	root, err := filepath.Abs(filepath.Join(string(filepath.Separator), "srv"))
	require.NoError(t, err)
	src := filepath.Join(root, "agent")
	cases := []struct {
		python string
		want   []string
	}{
		{"", []string{src}},
		{filepath.Join(root, "venv", "bin", "python"), []string{src, root}},
		{filepath.Join(root, ".venv", "bin", "python3"), []string{src, root}},
		{filepath.Join(root, ".VENV", "Scripts", "python.exe"), []string{src, root}},
		{filepath.Join(root, "venv", "BIN", "python"), []string{src, root}},
		{filepath.Join(src, "venv", "bin", "python"), []string{src}}, // the venv's parent is the source dir: listed once
		{filepath.Join(root, "env", "bin", "python"), []string{src}},
		{filepath.Join(root, "venv", "lib", "python"), []string{src}},
		{"/usr/bin/python3", []string{src}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, InstallRoots(src, tc.python), "InstallRoots(%q, %q)", src, tc.python)
	}
}

// BenchmarkReadUpdateActive classifies the marker of a live process
// within the age limit: the read, the parse, the signal and, where the
// platform says when a process started, that start time.
func BenchmarkReadUpdateActive(b *testing.B) {
	path := filepath.Join(tempDir(b), markerName)
	writeMarker(b, path, os.Getpid(), time.Now())
	if got := ReadUpdateMarker(path); got != Active {
		b.Fatalf("ReadUpdateMarker(%q) = %q, want %q", path, got, Active)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ReadUpdateMarker(path)
	}
}

// A classification of an unchanged marker reads neither the marker nor the
// process's start time again: an lstat and a liveness probe. A rewritten
// marker, or another process, is read anew.
func TestCacheSparesReads(t *testing.T) {
	later := time.Now().Add(time.Hour) // every stamp settled
	path := filepath.Join(tempDir(t), markerName)
	writeMarker(t, path, os.Getpid(), later.Add(-time.Minute))
	var opens, probes int
	e := testEnv(func(pid int64) ProcInfo {
		probes++
		return ProbeProcess(pid)
	})
	open := e.Open
	e.Open = func(p string, limit int64) ([]byte, FileKind, string) {
		opens++
		return open(p, limit)
	}
	e.Now = func() time.Time { return later }
	e.Cache = new(Cache)
	for i := 0; i < 5; i++ {
		require.Equal(t, Active, e.ReadMarker(path, maxAge).State)
	}
	assert.Equal(t, 1, opens, "marker reads")
	if runtime.GOOS == "linux" {
		assert.Equal(t, 1, probes, "process probes: a pidfd answers the rest")
	}

	child := longChild(t)
	writeMarker(t, path, child.Process.Pid, later.Add(-time.Minute))
	require.Equal(t, Active, e.ReadMarker(path, maxAge).State)
	assert.Equal(t, 2, opens, "a rewritten marker is read again")
	require.NoError(t, child.Process.Kill())
	_, _ = child.Process.Wait()
	assert.Equal(t, Stale, e.ReadMarker(path, maxAge).State, "the cached process exited")
}
