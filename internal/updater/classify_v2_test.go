package updater

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

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
