package runtimeguard

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadUpdateMarker(t *testing.T) {
	now := time.Now()
	old := now.Add(-DefaultMaxMarkerAge - time.Minute)
	pid := os.Getpid()
	cases := []struct {
		name string
		body string // "" with absent true: no file
		want MarkerState
	}{
		{"live process", fmt.Sprintf("%d\n%d\n", pid, now.Unix()), MarkerActive},
		{"fractional time", fmt.Sprintf("%d\n%.6f\n", pid, float64(now.UnixNano())/1e9), MarkerActive},
		{"no final newline", fmt.Sprintf("%d\n%d", pid, now.Unix()), MarkerActive},
		{"crlf lines", fmt.Sprintf("%d\r\n%d\r\n", pid, now.Unix()), MarkerActive},
		{"extra lines ignored", fmt.Sprintf("%d\n%d\nupdater v2\n", pid, now.Unix()), MarkerActive},
		{"padded values", fmt.Sprintf("  %d \n %d \n", pid, now.Unix()), MarkerActive},
		{"over age", fmt.Sprintf("%d\n%d\n", pid, now.Add(-DefaultMaxMarkerAge-time.Minute).Unix()), MarkerStale},
		{"over age beats liveness", fmt.Sprintf("1\n%d\n", now.Add(-48*time.Hour).Unix()), MarkerStale},
		{"one line", fmt.Sprintf("%d\n", pid), MarkerUnknown},
		{"empty", "", MarkerUnknown},
		{"pid zero", fmt.Sprintf("0\n%d\n", now.Unix()), MarkerUnknown},
		{"negative pid", fmt.Sprintf("-5\n%d\n", now.Unix()), MarkerUnknown},
		{"pid past the platform limit", fmt.Sprintf("%d\n%d\n", int64(maxPID)+1, now.Unix()), MarkerUnknown},
		{"pid 2^100", fmt.Sprintf("1267650600228229401496703205376\n%d\n", now.Unix()), MarkerUnknown},
		{"pid zero over age", fmt.Sprintf("0\n%d\n", old.Unix()), MarkerStale},
		{"negative pid over age", fmt.Sprintf("-5\n%d\n", old.Unix()), MarkerStale},
		{"pid past the platform limit over age", fmt.Sprintf("%d\n%d\n", int64(maxPID)+1, old.Unix()), MarkerStale},
		{"pid 2^100 over age", fmt.Sprintf("1267650600228229401496703205376\n%d\n", old.Unix()), MarkerStale},
		{"pid 2^100 in the future", fmt.Sprintf("1267650600228229401496703205376\n%d\n", now.Add(time.Hour).Unix()), MarkerUnknown},
		{"pid over int()'s digit limit, over age", fmt.Sprintf("%s\n%d\n", strings.Repeat("1", 4301), old.Unix()), MarkerUnknown},
		{"pid not a number", fmt.Sprintf("12a\n%d\n", now.Unix()), MarkerUnknown},
		{"time not a number", fmt.Sprintf("%d\nyesterday\n", pid), MarkerUnknown},
		{"hex float time", fmt.Sprintf("%d\n%s\n", pid, strconv.FormatFloat(float64(now.Unix()), 'x', -1, 64)), MarkerUnknown},
		{"hex pid", fmt.Sprintf("%#x\n%d\n", pid, now.Unix()), MarkerUnknown},
		{"underscores", fmt.Sprintf("%s\n%s.0_0\n", underscored(strconv.Itoa(pid)), underscored(strconv.FormatInt(now.Unix(), 10))), MarkerActive},
		{"doubled underscore", fmt.Sprintf("%d\n1__%d\n", pid, now.Unix()), MarkerUnknown},
		{"arabic-indic digits", fmt.Sprintf("%s\n%s\n", arabicIndic(strconv.Itoa(pid)), arabicIndic(strconv.FormatInt(now.Unix(), 10))), MarkerActive},
		{"unicode spaces", fmt.Sprintf("\u3000%d\u00a0\n\u2003%d\u0085\n", pid, now.Unix()), MarkerActive},
		{"exponent time", fmt.Sprintf("%d\n%.9e\n", pid, float64(now.Unix())), MarkerActive},
		{"overflowing time", fmt.Sprintf("%d\n1e400\n", pid), MarkerUnknown},
		{"infinite time", fmt.Sprintf("%d\ninf\n", pid), MarkerUnknown},
		{"negative infinite time", fmt.Sprintf("%d\n-inf\n", pid), MarkerUnknown},
		{"nan time", fmt.Sprintf("%d\nNaN\n", pid), MarkerUnknown},
		{"future time", fmt.Sprintf("%d\n%d\n", pid, now.Add(time.Hour).Unix()), MarkerUnknown},
		{"not utf-8", "\xff\xfe\n\x00\n", MarkerUnknown},
		{"at the size cap", padTo(fmt.Sprintf("%d\n%d\n", pid, now.Unix()), MaxMarkerBytes), MarkerActive},
		{"one byte over the cap", padTo(fmt.Sprintf("%d\n%d\n", pid, now.Unix()), MaxMarkerBytes+1), MarkerUnknown},
		{"far over the cap", padTo(fmt.Sprintf("%d\n%d\n", pid, now.Unix()), MaxMarkerBytes+1024), MarkerUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(tempDir(t), MarkerName)
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
	assert.Equal(t, MarkerAbsent, ReadUpdateMarker(filepath.Join(dir, "absent")))
	assert.Equal(t, MarkerAbsent, ReadUpdateMarker(filepath.Join(dir, "no-dir", "absent")))
}

func TestReadUpdateMarkerDirectory(t *testing.T) {
	dir := tempDir(t)
	assert.Equal(t, MarkerUnknown, ReadUpdateMarker(dir))
}

func TestMarkerLiveness(t *testing.T) {
	started := time.Now().Add(-time.Minute)
	cases := []struct {
		name  string
		probe procInfo
		want  MarkerState
	}{
		{"alive, start unknown", procInfo{state: processAlive}, MarkerActive},
		{"alive, started before the marker", procInfo{state: processAlive, start: started.Add(-time.Hour)}, MarkerActive},
		{"alive, started within the slack", procInfo{state: processAlive, start: started.Add(pidReuseSlack / 2)}, MarkerActive},
		{"alive, started just past the slack", procInfo{state: processAlive, start: started.Add(pidReuseSlack + 10*time.Millisecond)}, MarkerStale},
		{"alive, started after the marker: reused pid", procInfo{state: processAlive, start: started.Add(10 * time.Second)}, MarkerStale},
		{"gone", procInfo{state: processGone}, MarkerStale},
		{"cannot tell", procInfo{}, MarkerUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), MarkerName)
			writeMarker(t, path, 4242, started)
			var asked int
			e := testEnv(func(pid int) procInfo { asked = pid; return tc.probe })
			assert.Equal(t, tc.want, e.readMarker(path, DefaultMaxMarkerAge))
			assert.Equal(t, 4242, asked)
		})
	}
}

func TestMarkerAgeIsCheckedBeforeLiveness(t *testing.T) {
	path := filepath.Join(tempDir(t), MarkerName)
	writeMarker(t, path, 4242, time.Now().Add(-DefaultMaxMarkerAge-time.Second))
	e := testEnv(func(int) procInfo {
		t.Error("liveness was asked for an over-age marker")
		return procInfo{state: processAlive}
	})
	assert.Equal(t, MarkerStale, e.readMarker(path, DefaultMaxMarkerAge))
	assert.Equal(t, MarkerActive, testEnv(func(int) procInfo { return procInfo{state: processAlive} }).readMarker(path, time.Hour))
}

// The checks run in order: a time that is not finite or in the future,
// then the age limit, then the process ID's range, and none of them asks
// about a process.
func TestMarkerCheckOrder(t *testing.T) {
	now := time.Unix(1700000000, 0)
	cases := []struct {
		body string
		want MarkerState
	}{
		{"0\n1699999000\n", MarkerUnknown},
		{"-1\n1699999000\n", MarkerUnknown},
		{"1267650600228229401496703205376\n1699999000\n", MarkerUnknown},
		{"0\n1690000000\n", MarkerStale},
		{"-1\n1690000000\n", MarkerStale},
		{"1267650600228229401496703205376\n1690000000\n", MarkerStale},
		{"-1267650600228229401496703205376\n-inf\n", MarkerUnknown},
		{"0\nnan\n", MarkerUnknown},
		{"0\n1700000001\n", MarkerUnknown},
	}
	for _, tc := range cases {
		path := filepath.Join(tempDir(t), MarkerName)
		writeFile(t, path, tc.body)
		e := testEnv(func(pid int) procInfo {
			t.Errorf("liveness was asked for %d of %q", pid, tc.body)
			return procInfo{state: processAlive}
		})
		e.now = func() time.Time { return now }
		got := e.readMarker(path, DefaultMaxMarkerAge)
		assert.Equal(t, tc.want, got, "readMarker(%q) = %q, want %q", tc.body, got, tc.want)
	}
}

// Without a safe open the marker is never opened: a missing marker is
// absent, and any present one, valid or not, unknown.
func TestNoSafeOpenNeverOpensMarker(t *testing.T) {
	dir := tempDir(t)
	present := filepath.Join(dir, "present-marker")
	writeMarker(t, present, os.Getpid(), time.Now())
	e := testEnv(func(int) procInfo {
		t.Error("liveness was asked without reading the marker")
		return procInfo{}
	})
	e.openMarker = nil
	assert.Equal(t, MarkerUnknown, e.readMarker(present, DefaultMaxMarkerAge))
	assert.Equal(t, MarkerAbsent, e.readMarker(filepath.Join(dir, "missing"), DefaultMaxMarkerAge))
	assert.Equal(t, MarkerUnknown, e.readMarker(dir, DefaultMaxMarkerAge))
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
		assert.Equal(t, tc.want, installRoots(src, tc.python), "installRoots(%q, %q)", src, tc.python)
	}
}

func TestUpdateStateTable(t *testing.T) {
	cases := []struct {
		marker     MarkerState
		incomplete bool
		want       UpdateState
	}{
		{MarkerAbsent, false, UpdateUnverified},
		{MarkerActive, false, UpdateActive},
		{MarkerStale, false, UpdateStale},
		{MarkerUnknown, false, UpdateUnknown},
		{MarkerAbsent, true, UpdateIncomplete},
		{MarkerActive, true, UpdateIncomplete},
		{MarkerStale, true, UpdateIncomplete},
		{MarkerUnknown, true, UpdateUnknown},
	}
	for _, tc := range cases {
		home, root := tempDir(t), tempDir(t)
		marker := filepath.Join(home, MarkerName)
		switch tc.marker {
		case MarkerActive:
			writeMarker(t, marker, 4242, time.Now())
		case MarkerStale:
			writeMarker(t, marker, 4242, time.Now().Add(-time.Hour))
		case MarkerUnknown:
			writeFile(t, marker, "garbage")
		}
		if tc.incomplete {
			writeFile(t, filepath.Join(root, LazyRefreshIncompleteName), "")
		}
		e := testEnv(func(int) procInfo { return procInfo{state: processAlive} })
		assert.Equal(t, tc.want, e.observe(marker, DefaultMaxMarkerAge, []string{root}).State, "marker %s, incomplete %v", tc.marker, tc.incomplete)
	}
	require.Equal(t, UpdateUnknown, testEnv(nil).observe("", DefaultMaxMarkerAge, nil).State, "no home directory")
}
