package gittest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// WriteMarker writes an update marker in the first format at path: the
// process ID, then the time the update started in Unix seconds.
func WriteMarker(tb testing.TB, path string, pid int, started time.Time) {
	tb.Helper()
	WriteFile(tb, path, fmt.Sprintf("%d\n%.6f\n", pid, float64(started.UnixNano())/1e9))
}

// HermesReceipt returns the receipt fixture name of the module's
// testdata/hermes-receipts, written by a generation of the Hermes Agent's
// own writer, with its times rewritten to finish at finished (started a
// second before) and, unless sha is "", its post_update.sha set to sha.
func HermesReceipt(tb testing.TB, name, sha string, finished time.Time) []byte {
	tb.Helper()
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("the harness's source file is not known")
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "testdata", "hermes-receipts", name))
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		tb.Fatal(err)
	}
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000+00:00") }
	m["started_at"] = iso(finished.Add(-time.Second))
	m["finished_at"] = iso(finished)
	if sha != "" {
		m["post_update"].(map[string]any)["sha"] = sha
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}
