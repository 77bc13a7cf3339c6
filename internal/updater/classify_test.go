package updater

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

func TestReadUpdateMarker(t *testing.T) {
	now := time.Now()
	old := now.Add(-defaultMaxAge - time.Minute)
	pid := os.Getpid()
	cases := []struct {
		name string
		body string // "" with absent true: no file
		want Life
	}{
		{"live process", fmt.Sprintf("%d\n%d\n", pid, now.Unix()), Live},
		{"fractional time", fmt.Sprintf("%d\n%.6f\n", pid, float64(now.UnixNano())/1e9), Live},
		{"no final newline", fmt.Sprintf("%d\n%d", pid, now.Unix()), Live},
		{"crlf lines", fmt.Sprintf("%d\r\n%d\r\n", pid, now.Unix()), Live},
		{"extra lines ignored", fmt.Sprintf("%d\n%d\nupdater v2\n", pid, now.Unix()), Live},
		{"padded values", fmt.Sprintf("  %d \n %d \n", pid, now.Unix()), Live},
		{"over age", fmt.Sprintf("%d\n%d\n", pid, now.Add(-defaultMaxAge-time.Minute).Unix()), Ended},
		{"over age beats liveness", fmt.Sprintf("1\n%d\n", now.Add(-48*time.Hour).Unix()), Ended},
		{"one line", fmt.Sprintf("%d\n", pid), Unsure},
		{"empty, just written: a claim being published", "", Live},
		{"pid zero", fmt.Sprintf("0\n%d\n", now.Unix()), Unsure},
		{"negative pid", fmt.Sprintf("-5\n%d\n", now.Unix()), Unsure},
		{"pid past the platform limit", fmt.Sprintf("%d\n%d\n", int64(maxPID)+1, now.Unix()), Unsure},
		{"pid 2^100", fmt.Sprintf("1267650600228229401496703205376\n%d\n", now.Unix()), Unsure},
		{"pid zero over age", fmt.Sprintf("0\n%d\n", old.Unix()), Unsure},
		{"negative pid over age", fmt.Sprintf("-5\n%d\n", old.Unix()), Unsure},
		{"pid past the platform limit over age", fmt.Sprintf("%d\n%d\n", int64(maxPID)+1, old.Unix()), Ended},
		{"pid 2^100 over age", fmt.Sprintf("1267650600228229401496703205376\n%d\n", old.Unix()), Ended},
		{"pid 2^100 in the future", fmt.Sprintf("1267650600228229401496703205376\n%d\n", now.Add(time.Hour).Unix()), Unsure},
		{"pid over int()'s digit limit, over age", fmt.Sprintf("%s\n%d\n", strings.Repeat("1", 4301), old.Unix()), Unsure},
		{"pid not a number", fmt.Sprintf("12a\n%d\n", now.Unix()), Unsure},
		{"time not a number", fmt.Sprintf("%d\nyesterday\n", pid), Unsure},
		{"hex float time", fmt.Sprintf("%d\n%s\n", pid, strconv.FormatFloat(float64(now.Unix()), 'x', -1, 64)), Unsure},
		{"hex pid", fmt.Sprintf("%#x\n%d\n", pid, now.Unix()), Unsure},
		{"underscores", fmt.Sprintf("%s\n%s.0_0\n", underscored(strconv.Itoa(pid)), underscored(strconv.FormatInt(now.Unix(), 10))), Live},
		{"doubled underscore", fmt.Sprintf("%d\n1__%d\n", pid, now.Unix()), Unsure},
		{"arabic-indic digits", fmt.Sprintf("%s\n%s\n", arabicIndic(strconv.Itoa(pid)), arabicIndic(strconv.FormatInt(now.Unix(), 10))), Live},
		{"unicode spaces", fmt.Sprintf("\u3000%d\u00a0\n\u2003%d\u0085\n", pid, now.Unix()), Live},
		{"exponent time", fmt.Sprintf("%d\n%.9e\n", pid, float64(now.Unix())), Live},
		{"overflowing time", fmt.Sprintf("%d\n1e400\n", pid), Unsure},
		{"infinite time", fmt.Sprintf("%d\ninf\n", pid), Unsure},
		{"negative infinite time", fmt.Sprintf("%d\n-inf\n", pid), Unsure},
		{"nan time", fmt.Sprintf("%d\nNaN\n", pid), Unsure},
		{"future time", fmt.Sprintf("%d\n%d\n", pid, now.Add(time.Hour).Unix()), Unsure},
		{"not utf-8", "\xff\xfe\n\x00\n", Unsure},
		{"at the size cap", padTo(fmt.Sprintf("%d\n%d\n", pid, now.Unix()), MaxMarkerBytes), Live},
		{"one byte over the cap", padTo(fmt.Sprintf("%d\n%d\n", pid, now.Unix()), MaxMarkerBytes+1), Unsure},
		{"far over the cap", padTo(fmt.Sprintf("%d\n%d\n", pid, now.Unix()), MaxMarkerBytes+1024), Unsure},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(tempDir(t), markerName)
			writeFile(t, path, tc.body)
			got := readMarker(path)
			assert.Equal(t, tc.want, got, "readMarker(%q) = %q, want %q", tc.body[:min(len(tc.body), 40)], got, tc.want)
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
	assert.Equal(t, NoUpdate, readMarker(filepath.Join(dir, "absent")))
	assert.Equal(t, NoUpdate, readMarker(filepath.Join(dir, "no-dir", "absent")))
}

// A marker path through a file proves nothing: it is not the absence of a
// marker, which a path through a directory that exists would be.
func TestMarkerThroughAFileIsUnknown(t *testing.T) {
	file := filepath.Join(tempDir(t), "home")
	writeFile(t, file, "a file, not a home\n")
	for _, path := range []string{filepath.Join(file, markerName), filepath.Join(file, "x", markerName)} {
		assert.Equal(t, Unsure, readMarker(path), "readMarker(%q)", path)
	}
}

func TestReadUpdateMarkerDirectory(t *testing.T) {
	dir := tempDir(t)
	assert.Equal(t, Unsure, readMarker(dir))
}

func TestMarkerLiveness(t *testing.T) {
	started := time.Now().Add(-time.Minute)
	cases := []struct {
		name  string
		probe ProcInfo
		want  Life
	}{
		{"alive, start unknown", ProcInfo{State: ProcessAlive}, Live},
		{"alive, started before the marker", ProcInfo{State: ProcessAlive, Start: started.Add(-time.Hour)}, Live},
		{"alive, started within the slack", ProcInfo{State: ProcessAlive, Start: started.Add(pidReuseSlack / 2)}, Live},
		{"alive, started just past the slack", ProcInfo{State: ProcessAlive, Start: started.Add(pidReuseSlack + 10*time.Millisecond)}, Ended},
		{"alive, started after the marker: reused pid", ProcInfo{State: ProcessAlive, Start: started.Add(10 * time.Second)}, Ended},
		{"gone", ProcInfo{State: ProcessGone}, Ended},
		{"cannot tell", ProcInfo{}, Unsure},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), markerName)
			writeMarker(t, path, 4242, started)
			var asked int64
			e := probedEnv(func(pid int64) ProcInfo { asked = pid; return tc.probe })
			assert.Equal(t, tc.want, e.ClassifyMarker(path, defaultMaxAge).Life)
			assert.Equal(t, int64(4242), asked)
		})
	}
}

func TestMarkerAgeIsCheckedBeforeLiveness(t *testing.T) {
	path := filepath.Join(tempDir(t), markerName)
	writeMarker(t, path, 4242, time.Now().Add(-defaultMaxAge-time.Second))
	e := probedEnv(func(int64) ProcInfo {
		t.Error("liveness was asked for an over-age marker")
		return ProcInfo{State: ProcessAlive}
	})
	assert.Equal(t, Ended, e.ClassifyMarker(path, defaultMaxAge).Life)
	assert.Equal(t, Live, probedEnv(func(int64) ProcInfo { return ProcInfo{State: ProcessAlive} }).ClassifyMarker(path, time.Hour).Life)
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
		want Life
	}{
		{"0\n1699999000\n", Unsure},
		{"-1\n1699999000\n", Unsure},
		{"1267650600228229401496703205376\n1699999000\n", Unsure},
		{"0\n1690000000\n", Unsure},
		{"-1\n1690000000\n", Unsure},
		{"-1267650600228229401496703205376\n1690000000\n", Unsure},
		{"1267650600228229401496703205376\n1690000000\n", Ended},
		{"-1267650600228229401496703205376\n-inf\n", Unsure},
		{"0\nnan\n", Unsure},
		{"0\n1700000001\n", Unsure},
	}
	for _, tc := range cases {
		path := filepath.Join(tempDir(t), markerName)
		writeFile(t, path, tc.body)
		e := probedEnv(func(pid int64) ProcInfo {
			t.Errorf("liveness was asked for %d of %q", pid, tc.body)
			return ProcInfo{State: ProcessAlive}
		})
		e.Now = func() time.Time { return now }
		got := e.ClassifyMarker(path, defaultMaxAge).Life
		assert.Equal(t, tc.want, got, "readMarker(%q) = %q, want %q", tc.body, got, tc.want)
	}
}

// Something at the path that the open cannot use (a directory; a link,
// on the platforms that tell) proves nothing, and no process is asked
// about: a missing marker is absent.
func TestUnusableMarkerAsksNoProcess(t *testing.T) {
	dir := tempDir(t)
	e := probedEnv(func(int64) ProcInfo {
		t.Error("liveness was asked without reading the marker")
		return ProcInfo{}
	})
	assert.Equal(t, Unsure, e.ClassifyMarker(dir, defaultMaxAge).Life)
	assert.Equal(t, NoUpdate, e.ClassifyMarker(filepath.Join(dir, "missing"), defaultMaxAge).Life)
}

// A classification of an unchanged marker reads neither the marker nor the
// process's start time again: an lstat and a liveness probe. A rewritten
// marker, or another process, is read anew.
func TestCacheSparesReads(t *testing.T) {
	later := time.Now().Add(time.Hour) // every stamp settled
	path := filepath.Join(tempDir(t), markerName)
	writeMarker(t, path, os.Getpid(), later.Add(-time.Minute))
	var opens, probes int
	e := probedEnv(func(pid int64) ProcInfo {
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
		require.Equal(t, Live, e.ClassifyMarker(path, defaultMaxAge).Life)
	}
	assert.Equal(t, 1, opens, "marker reads")
	if runtime.GOOS == "linux" {
		assert.Equal(t, 1, probes, "process probes: a pidfd answers the rest")
	}

	child := gittest.LongChild(t)
	writeMarker(t, path, child.Process.Pid, later.Add(-time.Minute))
	require.Equal(t, Live, e.ClassifyMarker(path, defaultMaxAge).Life)
	assert.Equal(t, 2, opens, "a rewritten marker is read again")
	require.NoError(t, child.Process.Kill())
	_, _ = child.Process.Wait()
	assert.Equal(t, Ended, e.ClassifyMarker(path, defaultMaxAge).Life, "the cached process exited")
}

// A marker released by renaming it aside is active while its releaser
// lives, and nothing once it is gone; any other artifact is unknown.
func TestMarkerRelease(t *testing.T) {
	home := tempDir(t)
	path := filepath.Join(home, markerName)
	e := System
	assert.Equal(t, NoUpdate, e.ClassifyMarker(path, defaultMaxAge).Life)

	live := fmt.Sprintf("%s%s%d-%s", path, ReleaseInfix, os.Getpid(), "6f1c2a8e-0d3b-4b1e-9a55-3f1e2d4c5b6a")
	writeMarker(t, live, os.Getpid(), time.Now())
	m := e.ClassifyMarker(path, defaultMaxAge)
	assert.Equal(t, Live, m.Life, "a release in flight, the marker gone: %s", m.Reason)
	assert.Contains(t, m.Reason, "releasing")
	writeMarker(t, path, gittest.ExitedPID(t, processGone), time.Now())
	assert.Equal(t, Live, e.ClassifyMarker(path, defaultMaxAge).Life, "a stale marker and a live release")
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Remove(live))

	dead := fmt.Sprintf("%s%s%d-%s", path, ReleaseInfix, gittest.ExitedPID(t, processGone), "x")
	writeMarker(t, dead, os.Getpid(), time.Now())
	assert.Equal(t, NoUpdate, e.ClassifyMarker(path, defaultMaxAge).Life, "a release whose process is gone")
	writeMarker(t, path, os.Getpid(), time.Now())
	assert.Equal(t, Live, e.ClassifyMarker(path, defaultMaxAge).Life)
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Remove(dead))

	writeFile(t, path+".cas-claim-123", "")
	assert.Equal(t, Unsure, e.ClassifyMarker(path, defaultMaxAge).Life, "an unresolved artifact")
	require.NoError(t, os.Remove(path+".cas-claim-123"))
	writeFile(t, path+ReleaseInfix+"abc-x", "")
	assert.Equal(t, Unsure, e.ClassifyMarker(path, defaultMaxAge).Life, "a release that names no process")
	require.NoError(t, os.Remove(path+ReleaseInfix+"abc-x"))

	// A marker that another file merely starts like is not its artifact.
	writeFile(t, path+"-notes", "")
	assert.Equal(t, NoUpdate, e.ClassifyMarker(path, defaultMaxAge).Life)

	// A third line (Hermes's handoff-bridge) changes nothing.
	writeFile(t, path, fmt.Sprintf("%d\n%d\nhandoff-bridge\n", os.Getpid(), time.Now().Unix()))
	assert.Equal(t, Live, e.ClassifyMarker(path, defaultMaxAge).Life)
}

// probeAlive is a process probe under which the processes pids and this
// one live and every other is gone.
func probeAlive(pids ...int64) func(int64) ProcInfo {
	return func(pid int64) ProcInfo {
		if pid == int64(os.Getpid()) || slices.Contains(pids, pid) {
			return ProcInfo{State: ProcessAlive}
		}
		return ProcInfo{State: ProcessGone}
	}
}

// A marker is claimed only where none is or a stale one was, reads back as
// what it says, and is removed only by the updater that wrote it.
func TestClaimAndRemoveMarker(t *testing.T) {
	path := filepath.Join(tempDir(t), "home", "marker")
	start := time.Now()
	e := probedEnv(probeAlive(1234))
	require.NoError(t, ClaimMarker("", path, 1234, start, judgeOf(e)))
	pid, started, ok := ParseMarker(mustRead(t, path))
	require.True(t, ok)
	assert.Equal(t, int64(1234), pid)
	assert.Equal(t, float64(start.Unix()), started, "the updater's own reader takes whole seconds only")

	assert.ErrorIs(t, ClaimMarker("", path, 5678, start, judgeOf(e)), ErrMarkerHeld, "an active marker")
	removed, err := RemoveMarker("", path, 5678, start)
	require.NoError(t, err)
	assert.False(t, removed, "another updater's marker")
	removed, err = RemoveMarker("", path, 1234, start.Add(time.Second))
	require.NoError(t, err)
	assert.False(t, removed, "a marker of the same process ID, written at another time")
	assert.FileExists(t, path)
	assertNoArtifacts(t, path)

	// 1234 is gone: its marker is stale, and replaced.
	e = probedEnv(probeAlive(5678))
	require.NoError(t, ClaimMarker("", path, 5678, start, judgeOf(e)), "a stale marker is replaced")
	assertNoArtifacts(t, path)
	removed, err = RemoveMarker("", path, 1234, start)
	require.NoError(t, err)
	assert.False(t, removed, "the first updater leaves the marker of the one that replaced it")
	removed, err = RemoveMarker("", path, 5678, start)
	require.NoError(t, err)
	assert.True(t, removed)
	assert.NoFileExists(t, path)
	assertNoArtifacts(t, path)

	removed, err = RemoveMarker("", path, 5678, start)
	assert.NoError(t, err, "nothing there")
	assert.False(t, removed)
	require.NoError(t, os.Mkdir(path, 0o755))
	removed, err = RemoveMarker("", path, 5678, start)
	assert.NoError(t, err)
	assert.False(t, removed, "a directory is no marker of ours")
	assert.DirExists(t, path)
	assert.ErrorIs(t, ClaimMarker("", path, 5678, start, judgeOf(e)), ErrMarkerHeld, "a directory at the marker's path proves nothing")
}

// Of updaters started at once on a stale marker, exactly one claims it:
// replacing a stale marker is as exclusive as creating one.
func TestClaimStaleMarkerIsExclusive(t *testing.T) {
	const racers, rounds = 6, 150
	dir := tempDir(t)
	for round := 0; round < rounds; round++ {
		path := filepath.Join(dir, fmt.Sprintf("marker-%d", round))
		writeMarker(t, path, 99, time.Now().Add(-time.Minute)) // process 99 is gone
		pids := make([]int64, racers)
		for i := range pids {
			pids[i] = int64(1000 + i)
		}
		e := probedEnv(probeAlive(pids...))
		var wg sync.WaitGroup
		errs := make([]error, racers)
		start := make(chan struct{})
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = ClaimMarker("", path, 1000+i, time.Now(), judgeOf(e))
			}()
		}
		close(start)
		wg.Wait()
		winners := 0
		winner := -1
		for i, err := range errs {
			if err == nil {
				winners++
				winner = i
			} else {
				require.ErrorIs(t, err, ErrMarkerHeld, "racer %d", i)
			}
		}
		require.Equal(t, 1, winners, "round %d: claims %v", round, errs)
		pid, _, ok := ParseMarker(mustRead(t, path))
		require.True(t, ok)
		assert.Equal(t, int64(1000+winner), pid, "the marker is the winner's")
		assertNoArtifacts(t, path)
	}
}

// judgeOf is the classification a claim obeys in the environment e.
func judgeOf(e *Env) Judge { return markerJudge{e, defaultMaxAge} }

// assertNoArtifacts checks that nothing was left beside the marker.
func assertNoArtifacts(t *testing.T, path string) {
	t.Helper()
	left, err := filepath.Glob(path + ".cas-*")
	require.NoError(t, err)
	assert.Empty(t, left, "artifacts left beside %s", path)
}

// FuzzReadUpdateMarker: any bytes in a real marker file classify as one of
// the four words and the file is left as it was. A marker of the first
// format (no creation time, no delegate): a time that is not finite is
// unknown, a marker over the age limit is stale whatever its process ID,
// and no process is asked about unless the body parsed, its time is
// within the age limit and its process ID is one this platform can ask
// about. One of the second format (a creation time): lines 1 and 2 that
// are not ASCII digits within 32 and 64 bits are unknown, and process ID 0
// with no delegate is stale.
var markerStates = map[Life]bool{NoUpdate: true, Live: true, Ended: true, Unsure: true}

func FuzzReadUpdateMarker(f *testing.F) {
	f.Add([]byte("1234\n1700000000\n"), int64(0))
	f.Add([]byte("1\n1\n"), int64(3600))
	f.Add([]byte(""), int64(0))
	f.Add([]byte("99999\n-1e9\n"), int64(-3600))
	f.Add([]byte("0\n1700000000\nct:1700000000.000\n"), int64(0))
	f.Add([]byte("6080\n18446744073709551616\nct:1.5\n"), int64(0))
	f.Add([]byte("6080\n1700000000\nct:1e9\ndelegate:7 ct:1.25\n"), int64(60))
	dir := tempDir(f)
	f.Fuzz(func(t *testing.T, body []byte, offset int64) {
		path := filepath.Join(dir, "marker")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1700000000, 0).Add(time.Duration(offset) * time.Second)
		nowSec := float64(now.UnixNano()) / 1e9
		parsedPID, started, parsed := ParseMarker(body)
		ids := ParseIdentities(body)
		if parsed && (ids.HasCreated || ids.Delegate.PID != 0) {
			e := probedEnv(func(pid int64) ProcInfo { return ProcInfo{State: Liveness(pid % 3)} })
			e.Now = func() time.Time { return now }
			got := e.ClassifyMarker(path, defaultMaxAge).Life
			switch {
			case !markerStates[got] || got == NoUpdate:
				t.Fatalf("readMarker(%q) = %q", body, got)
			case ids.HasCreated && !secondFormatLines(body) && got != Unsure:
				t.Fatalf("readMarker(%q) = %q, want %q: the second format's lines 1 and 2 malformed", body, got, Unsure)
			case ids.HasCreated && secondFormatLines(body) && parsedPID == 0 && ids.Delegate.PID == 0 && got != Ended:
				t.Fatalf("readMarker(%q) = %q, want %q: process ID 0 is no process", body, got, Ended)
			}
			return
		}
		e := probedEnv(func(pid int64) ProcInfo {
			switch {
			case !parsed:
				t.Fatalf("liveness asked for %d of an unparsable body %q", pid, body)
			case int64(pid) != parsedPID || pid <= 0 || int64(pid) > maxPID:
				t.Fatalf("liveness asked for %d of a body naming %d: %q", pid, parsedPID, body)
			case !(started <= nowSec && nowSec-started <= defaultMaxAge.Seconds()):
				t.Fatalf("liveness asked for %d of a body whose time %v is not within the age limit", pid, started)
			}
			return ProcInfo{State: Liveness(pid % 3)}
		})
		e.Now = func() time.Time { return now }
		got := e.ClassifyMarker(path, defaultMaxAge).Life
		if !markerStates[got] || got == NoUpdate {
			t.Fatalf("readMarker(%q) = %q", body, got)
		}
		finite := !math.IsNaN(started) && !math.IsInf(started, 0)
		if parsed && !finite && got != Unsure {
			t.Fatalf("readMarker(%q) = %q, want %q: its time is not finite", body, got, Unsure)
		}
		if parsed && finite && started <= nowSec && parsedPID <= 0 && got != Unsure {
			t.Fatalf("readMarker(%q) = %q, want %q: a process ID of zero or less, whatever the age", body, got, Unsure)
		}
		if parsed && finite && started <= nowSec && parsedPID > 0 && nowSec-started > defaultMaxAge.Seconds() && got != Ended {
			t.Fatalf("readMarker(%q) = %q, want %q: over age, whatever the positive process ID", body, got, Ended)
		}
		after, err := os.ReadFile(path)
		if err != nil || string(after) != string(body) {
			t.Fatalf("the marker changed: %q -> %q (%v)", body, after, err)
		}
	})
}

// BenchmarkReadUpdateActive classifies the marker of a live process
// within the age limit: the read, the parse, the signal and, where the
// platform says when a process started, that start time.
func BenchmarkReadUpdateActive(b *testing.B) {
	path := filepath.Join(tempDir(b), markerName)
	writeMarker(b, path, os.Getpid(), time.Now())
	if got := readMarker(path); got != Live {
		b.Fatalf("readMarker(%q) = %q, want %q", path, got, Live)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		readMarker(path)
	}
}

// A claim obeys the guard's classification, whatever the marker: it
// replaces what a guard reads as stale or absent and refuses everything
// else, and the claimed marker reads as active. The judge the command-line
// tool claims by is the guard's own.
func TestClaimObeysTheGuardsReading(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name  string
		setup func(t *testing.T, path string)
	}{
		{"none", func(*testing.T, string) {}},
		{"a live process", func(t *testing.T, path string) { writeMarker(t, path, os.Getpid(), now) }},
		{"over age", func(t *testing.T, path string) { writeMarker(t, path, os.Getpid(), now.Add(-time.Hour)) }},
		{"a gone process", func(t *testing.T, path string) { writeMarker(t, path, gittest.ExitedPID(t, processGone), now) }},
		{"garbage", func(t *testing.T, path string) { writeFile(t, path, "garbage") }},
		{"a time in the future", func(t *testing.T, path string) { writeMarker(t, path, os.Getpid(), now.Add(time.Hour)) }},
		{"a directory", func(t *testing.T, path string) { require.NoError(t, os.Mkdir(path, 0o755)) }},
		{"a release in flight", func(t *testing.T, path string) {
			writeMarker(t, fmt.Sprintf("%s%s%d-x", path, ReleaseInfix, os.Getpid()), os.Getpid(), now)
		}},
		{"a stale marker and a release in flight", func(t *testing.T, path string) {
			writeMarker(t, path, os.Getpid(), now.Add(-time.Hour))
			writeMarker(t, fmt.Sprintf("%s%s%d-x", path, ReleaseInfix, os.Getpid()), os.Getpid(), now)
		}},
		{"a finished release", func(t *testing.T, path string) {
			writeMarker(t, fmt.Sprintf("%s%s%d-x", path, ReleaseInfix, gittest.ExitedPID(t, processGone)), os.Getpid(), now)
		}},
		{"an unresolved cleanup", func(t *testing.T, path string) { writeFile(t, path+".cas-claim-1", "") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), markerName)
			tc.setup(t, path)
			before := readMarker(path)
			err := ClaimMarker("", path, os.Getpid(), now, System.Judge(defaultMaxAge))
			if before == NoUpdate || before == Ended {
				require.NoError(t, err, "ClaimMarker of a marker the guard reads as %s", before)
				assert.Equal(t, Live, readMarker(path), "the claimed marker")
				removed, err := RemoveMarker("", path, os.Getpid(), now)
				require.NoError(t, err)
				assert.True(t, removed)
				return
			}
			require.ErrorIs(t, err, ErrMarkerHeld, "ClaimMarker of a marker the guard reads as %s", before)
			assert.Contains(t, err.Error(), before.String(), "the refusal says what the guard reads")
			assert.Equal(t, before, readMarker(path), "a refused claim changes nothing")
		})
	}
}
