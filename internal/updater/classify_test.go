package updater

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
			gittest.WriteMarker(t, path, 4242, started)
			var asked int64
			e := probedEnv(func(pid int64) ProcInfo { asked = pid; return tc.probe })
			assert.Equal(t, tc.want, e.ClassifyMarker(path, defaultMaxAge).Life)
			assert.Equal(t, int64(4242), asked)
		})
	}
}

func TestMarkerAgeIsCheckedBeforeLiveness(t *testing.T) {
	path := filepath.Join(tempDir(t), markerName)
	gittest.WriteMarker(t, path, 4242, time.Now().Add(-defaultMaxAge-time.Second))
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

// A marker released by renaming it aside is active while its releaser
// lives, and nothing once it is gone; any other artifact is unknown.
func TestMarkerRelease(t *testing.T) {
	home := tempDir(t)
	path := filepath.Join(home, markerName)
	e := System
	assert.Equal(t, NoUpdate, e.ClassifyMarker(path, defaultMaxAge).Life)

	live := fmt.Sprintf("%s%s%d-%s", path, ReleaseInfix, os.Getpid(), "6f1c2a8e-0d3b-4b1e-9a55-3f1e2d4c5b6a")
	gittest.WriteMarker(t, live, os.Getpid(), time.Now())
	m := e.ClassifyMarker(path, defaultMaxAge)
	assert.Equal(t, Live, m.Life, "a release in flight, the marker gone: %s", m.Reason)
	assert.Contains(t, m.Reason, "releasing")
	gittest.WriteMarker(t, path, gittest.ExitedPID(t, processGone), time.Now())
	assert.Equal(t, Live, e.ClassifyMarker(path, defaultMaxAge).Life, "a stale marker and a live release")
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Remove(live))

	dead := fmt.Sprintf("%s%s%d-%s", path, ReleaseInfix, gittest.ExitedPID(t, processGone), "x")
	gittest.WriteMarker(t, dead, os.Getpid(), time.Now())
	assert.Equal(t, NoUpdate, e.ClassifyMarker(path, defaultMaxAge).Life, "a release whose process is gone")
	gittest.WriteMarker(t, path, os.Getpid(), time.Now())
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
	gittest.WriteMarker(b, path, os.Getpid(), time.Now())
	if got := readMarker(path); got != Live {
		b.Fatalf("readMarker(%q) = %q, want %q", path, got, Live)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		readMarker(path)
	}
}

// createdAt is the creation time of a live process as the updater records
// it on a marker's third line.
func createdAt(t *testing.T, pid int, offset float64) string {
	t.Helper()
	ct := CreationTime(pid)
	if ct == "" {
		t.Skip("this platform does not tell when a process started")
	}
	v, err := strconv.ParseFloat(ct, 64)
	require.NoError(t, err)
	return strconv.FormatFloat(v+offset, 'f', 3, 64)
}

// Markers of the updater's second format are judged by the identities
// they name, as the updater's own reader judges them: an owner that runs
// with the recorded creation time is live however old the marker, a
// delegate that runs keeps a dead owner's update in progress, and a live
// process created at another time holds a reused ID. A byte order mark,
// CRLF and spaces are tolerated.
func TestMarkerSecondFormat(t *testing.T) {
	live := gittest.LongChild(t).Process.Pid
	dead := gittest.ExitedPID(t, processGone)
	ct := createdAt(t, live, 0)
	now := time.Now()
	old := now.Add(-25 * time.Minute).Unix()
	cases := []struct {
		name, body string
		want       Life
		reason     string
	}{
		{"a live owner older than 20 minutes", fmt.Sprintf("%d\n%d\nct:%s\n", live, old, ct), Live, "its owner process"},
		{"a killed owner with a running delegate", fmt.Sprintf("%d\n%d\nct:1.000\ndelegate:%d ct:%s\n", dead, now.Unix(), live, ct), Live, "its delegate process"},
		{"a killed owner, its delegate old and running", fmt.Sprintf("%d\n%d\nct:1.000\ndelegate:%d ct:%s\nrun:r-1\n", dead, old, live, ct), Live, "its delegate"},
		{"a reused ID: another creation time", fmt.Sprintf("%d\n%d\nct:%s\n", live, now.Unix(), createdAt(t, live, -100)), Ended, "its ID was reused"},
		{"a reused ID of the delegate, its owner dead", fmt.Sprintf("%d\n%d\nct:1.000\ndelegate:%d ct:%s\n", dead, now.Unix(), live, createdAt(t, live, -100)), Ended, "reused"},
		{"a dead owner, no delegate", fmt.Sprintf("%d\n%d\nct:1.000\n", dead, now.Unix()), Ended, "is gone"},
		{"a byte order mark", fmt.Sprintf("\ufeff%d\n%d\nct:%s\n", live, now.Unix(), ct), Live, "its owner"},
		{"a byte order mark, first format", fmt.Sprintf("\ufeff%d\n%d\n", live, now.Unix()), Live, "is alive"},
		{"CRLF, a running delegate", fmt.Sprintf("%d\r\n%d\r\nct:1.000\r\ndelegate:%d ct:%s\r\n", dead, now.Unix(), live, ct), Live, "its delegate"},
		{"spaces around the values", fmt.Sprintf(" %d \n\t%d\t\n ct:%s \n", live, old, ct), Live, "its owner"},
		{"a malformed creation time: the first format's age limit", fmt.Sprintf("%d\n%d\nct:abc\n", live, old), Ended, "older than"},
		{"a delegate on line 3 is no delegate", fmt.Sprintf("%d\n%d\ndelegate:%d ct:%s\n", dead, now.Unix(), live, ct), Ended, "is gone"},
		{"a spaced delegate is no delegate", fmt.Sprintf("%d\n%d\nct:1.000\ndelegate: %d ct:%s\n", dead, now.Unix(), live, ct), Ended, "is gone"},
		{"first format, a killed owner with a running delegate", fmt.Sprintf("%d\n%d\n\ndelegate:%d ct:%s\n", dead, now.Unix(), live, ct), Live, "its delegate process"},
		{"first format, older than 20 minutes, a running delegate", fmt.Sprintf("%d\n%d\n\ndelegate:%d ct:%s\n", dead, old, live, ct), Live, "its delegate process"},
		{"a malformed creation time, a running delegate", fmt.Sprintf("%d\n%d\nct:abc\ndelegate:%d ct:%s\n", dead, now.Unix(), live, ct), Live, "its delegate process"},
		{"first format, a killed owner, its delegate's ID reused", fmt.Sprintf("%d\n%d\n\ndelegate:%d ct:%s\n", dead, now.Unix(), live, createdAt(t, live, -100)), Ended, "reused"},
		{"first format, a running owner, too old, its delegate gone", fmt.Sprintf("%d\n%d\n\ndelegate:%d ct:1.000\n", live, old, dead), Ended, "older than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), markerName)
			writeFile(t, path, tc.body)
			m := System.ClassifyMarker(path, defaultMaxAge)
			assert.Equal(t, tc.want, m.Life, "%q: %s", tc.body, m.Reason)
			assert.Contains(t, m.Reason, tc.reason)
		})
	}
}

// An empty marker is a claim being published for 5 seconds after it was
// written (a writer without hard links creates it, then writes it), and a
// claim never finished after: judged on a clock set on either side.
func TestEmptyMarkerAge(t *testing.T) {
	path := filepath.Join(tempDir(t), markerName)
	writeFile(t, path, "")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	at := func(d time.Duration) Life {
		e := *System
		e.Now = func() time.Time { return fi.ModTime().Add(d) }
		return e.ClassifyMarker(path, defaultMaxAge).Life
	}
	assert.Equal(t, Live, at(0))
	assert.Equal(t, Live, at(EmptyMarkerGrace-time.Millisecond))
	assert.Equal(t, Ended, at(EmptyMarkerGrace))
	assert.Equal(t, Ended, at(time.Hour))
}

// The judge cases of the Hermes Agent's shared marker corpus
// (tests/fixtures/update_marker_corpus.json, schema 1: "every marker
// reader runs the judge cases"), transcribed as facts: the marker's
// bytes, the process table (a process ID and its creation time; nil: alive,
// its creation time unreadable; absent: no such process), the reading
// process and what the updater's reader says of it. The corpus's clock
// reads 1791079400, its reader is process 4242 created at 1791079000.2504
// unless a case says otherwise, and the reader's own process is always
// alive with that creation time.
const (
	corpusNow   = 1791079400
	corpusOwnID = 4242
	corpusOwnCT = 1791079000.2504
)

// The verdicts of the corpus's judge: the marker cannot be parsed as the
// updater's format, no identity it names lives, one lives, or one is the
// reader itself.
const (
	judgeMalformed = "malformed"
	judgeDead      = "dead"
	judgeLive      = "live"
	judgeOurs      = "ours"
)

// corpusCase is one judge case.
type corpusCase struct {
	name    string
	body    string
	live    map[int64]*float64
	ownID   int64   // 0: corpusOwnID
	ownCT   float64 // 0: corpusOwnCT
	verdict string
	run     string // the first run the marker names, "" for none
	// seed marks a case where the seed's rule stands instead of the
	// updater's: a first-format marker naming the reader's own live
	// process is active.
	seed bool
}

func ct(v float64) *float64 { return &v }

var corpusJudgeCases = []corpusCase{
	{name: "v2_live_foreign_owner", body: "6080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "v2_dead_owner", body: "6080\n1791079348\nct:1791079348.328\n", verdict: judgeDead},
	{name: "v2_recycled_pid_ct_mismatch", body: "6080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079390.0)}, verdict: judgeDead},
	{name: "v2_foreign_ct_inside_2s_tolerance", body: "6080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079349.9)}, verdict: judgeLive},
	{name: "v2_foreign_ct_outside_2s_tolerance", body: "6080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079350.4)}, verdict: judgeDead},
	{name: "self_exact_incarnation", body: "4242\n1791079001\nct:1791079000.250\n", verdict: judgeOurs},
	{name: "self_pid_reuse_inside_2s", body: "4242\n1791078999\nct:1791078999.300\n", verdict: judgeDead},
	{name: "self_pid_reuse_6ms", body: "4242\n1791079001\nct:1791079000.244\n", verdict: judgeDead},
	{name: "self_pid_v1_young", body: "4242\n1791079390\n", verdict: judgeDead, seed: true},
	{name: "self_pid_bad_ct_line_is_v1", body: "4242\n1791079390\nct:soon\n", verdict: judgeDead, seed: true},
	{name: "v1_foreign_young", body: "6080\n1791079390\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "v1_foreign_past_ceiling", body: "6080\n1791078000\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeDead},
	{name: "v1_foreign_dead", body: "6080\n1791079390\n", verdict: judgeDead},
	{name: "v2_ct_inaccessible_young", body: "6080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: nil}, verdict: judgeLive},
	{name: "v2_ct_inaccessible_past_ceiling", body: "6080\n1791078100\nct:1791078100.000\n", live: map[int64]*float64{6080: nil}, verdict: judgeDead},
	{name: "bad_ct_line_is_v1", body: "6080\n1791079390\nct:1.2.3\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "ct_line_trailing_garbage_is_v1", body: "6080\n1791078000\nct:1791079348.328 x\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeDead},
	{name: "crash12db_owner_and_delegate_dead", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", verdict: judgeDead},
	{name: "delegate_live_owner_dead", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeLive},
	{name: "owner_and_delegate_live", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{6080: ct(1791079348.328), 13368: ct(1791079350.794)}, verdict: judgeLive},
	{name: "delegate_recycled", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{13368: ct(1791079399.0)}, verdict: judgeDead},
	{name: "delegate_is_us_owner_dead", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", ownID: 13368, ownCT: 1791079350.7941, verdict: judgeOurs},
	{name: "delegate_is_us_owner_live", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{6080: ct(1791079348.328)}, ownID: 13368, ownCT: 1791079350.7941, verdict: judgeOurs},
	{name: "delegate_names_our_pid_previous_incarnation", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\n", ownID: 13368, ownCT: 1791079351.5, verdict: judgeDead},
	{name: "owner_ours_delegate_live", body: "4242\n1791079001\nct:1791079000.250\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeOurs},
	{name: "padded_lines", body: " 6080 \t\n\t1791079348  \nct:1791079348.328\t\n  delegate:13368 ct:1791079350.794  \n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeLive},
	{name: "crlf_and_bom", body: "\ufeff6080\r\n1791079348\r\nct:1791079348.328\r\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "no_trailing_newline", body: "6080\n1791079348\nct:1791079348.328", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "interior_whitespace_pid", body: "60 80\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328), 60: ct(1791079348.328), 80: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "interior_whitespace_delegate", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368  ct:1791079350.794\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeDead},
	{name: "delegate_without_ct_ignored", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeDead},
	{name: "malformed_started_at", body: "6080\nyesterday\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "malformed_pid", body: "pid\n1791079348\n", verdict: judgeMalformed},
	{name: "negative_pid", body: "-6080\n1791079348\nct:1791079348.328\n", verdict: judgeMalformed},
	{name: "pid_beyond_u32", body: "4294967296\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{4294967296: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "single_line", body: "6080\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "pid_zero", body: "0\n1791079390\nct:1791079390.000\n", verdict: judgeDead},
	{name: "run_line", body: "6080\n1791079348\nct:1791079348.328\nrun:desk-7f3a.1\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive, run: "desk-7f3a.1"},
	{name: "run_after_delegate", body: "6080\n1791079348\nct:1791079348.328\ndelegate:13368 ct:1791079350.794\nrun:desk-7f3a.1\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeLive, run: "desk-7f3a.1"},
	{name: "delegate_after_run", body: "6080\n1791079348\nct:1791079348.328\nrun:desk-7f3a.1\ndelegate:13368 ct:1791079350.794\n", live: map[int64]*float64{13368: ct(1791079350.794)}, verdict: judgeLive, run: "desk-7f3a.1"},
	{name: "run_line_dead_claim", body: "6080\n1791079348\nct:1791079348.328\nrun:desk-7f3a.1\n", verdict: judgeDead, run: "desk-7f3a.1"},
	{name: "malformed_run_ignored", body: "6080\n1791079348\nct:1791079348.328\nrun:has space\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "first_of_two_run_lines", body: "6080\n1791079348\nct:1791079348.328\nrun:first\nrun:second\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive, run: "first"},
	// Thousands of digits: past the 4,300 Python's int() takes.
	{name: "pid_huge_digit_count", body: strings.Repeat("1", 5000) + "\n1791079348\nct:1791079348.328\n", verdict: judgeMalformed},
	{name: "pid_leading_zeros", body: "00000000000000006080\n1791079348\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "started_at_huge_digit_count", body: "6080\n" + strings.Repeat("1", 5000) + "\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "started_at_beyond_u64", body: "6080\n18446744073709551616\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeMalformed},
	{name: "started_at_u64_max", body: "6080\n18446744073709551615\nct:1791079348.328\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeLive},
	{name: "delegate_pid_huge_digit_count", body: "6080\n1791079348\nct:1791079348.328\ndelegate:" + strings.Repeat("9", 5000) + " ct:1791079350.794\n", verdict: judgeDead},
	// Hundreds of digits: past a float's range.
	{name: "ct_huge_digit_count", body: "6080\n1791079348\nct:" + strings.Repeat("1", 400) + "\n", live: map[int64]*float64{6080: ct(1791079348.328)}, verdict: judgeDead},
}

// corpusEnv is the environment of a judge case: the corpus's clock, its
// process table and its reader. A creation time in the table is when the
// process started on either clock (the corpus knows one).
func corpusEnv(c *corpusCase) *Env {
	ownID, ownCT := cmp.Or(c.ownID, corpusOwnID), cmp.Or(c.ownCT, corpusOwnCT)
	at := func(ct float64) ProcInfo {
		sec, frac := math.Modf(ct)
		t := time.Unix(int64(sec), int64(frac*1e9))
		return ProcInfo{State: ProcessAlive, Start: t, Created: t}
	}
	e := testEnv()
	e.Cache = nil
	e.Now = func() time.Time { return time.Unix(corpusNow, 0) }
	e.Self = func() Identity { return Identity{PID: ownID, Created: ownCT, HasCreated: true} }
	e.Probe = func(pid int64) ProcInfo {
		if pid == ownID {
			return at(ownCT)
		}
		created, ok := c.live[pid]
		switch {
		case !ok:
			return ProcInfo{State: ProcessGone}
		case created == nil:
			return ProcInfo{State: ProcessAlive}
		}
		return at(*created)
	}
	return e
}

// stateOf is the marker state a guard gives what the corpus's judge
// says: a malformed marker proves nothing, a dead one is stale, one that
// lives (or is the reader) is active.
func stateOf(verdict string) Life {
	switch verdict {
	case judgeMalformed:
		return Unsure
	case judgeDead:
		return Ended
	}
	return Live
}

// Every judge case of the corpus, with its process table and clock: the
// guard's state is the updater's verdict, but where the seed's rule
// stands (a first-format marker naming the reader's own live process is
// active, as the hermes-webui guard's tests use it).
func TestMarkerCorpusJudgeCases(t *testing.T) {
	for i := range corpusJudgeCases {
		c := &corpusJudgeCases[i]
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), markerName)
			writeFile(t, path, c.body)
			m := corpusEnv(c).ClassifyMarker(path, defaultMaxAge)
			want := stateOf(c.verdict)
			if c.seed {
				want = Live
			}
			assert.Equal(t, want, m.Life, "%s: the updater says %s; %s", c.name, c.verdict, m.Reason)
			if c.verdict != judgeMalformed {
				var run string
				if ids := ParseIdentities([]byte(c.body)); len(ids.Runs) > 0 {
					run = ids.Runs[0]
				}
				assert.Equal(t, c.run, run, "the marker's run")
			}
		})
	}
}

// The corpus's clock and table are the only ones the judge cases see: a
// table that makes the owner of a live case dead changes the state, so
// the environment, not the host, decides.
func TestMarkerCorpusTableDecides(t *testing.T) {
	c := corpusJudgeCases[0]
	path := filepath.Join(tempDir(t), markerName)
	writeFile(t, path, c.body)
	assert.Equal(t, Live, corpusEnv(&c).ClassifyMarker(path, defaultMaxAge).Life)
	c.live = nil
	assert.Equal(t, Ended, corpusEnv(&c).ClassifyMarker(path, defaultMaxAge).Life, fmt.Sprintf("%q with no process", c.body))
}
