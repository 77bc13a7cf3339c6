package gittest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Installs without Git: a module and its build stamp, as the packagers of
// Docker images, Nix store paths and desktop apps leave them.

// StampFile is the build stamp's name in an install: Hermes's.
const StampFile = "install-stamp.json"

// Absent, as the value of a field given to Stamp, leaves the field out.
var Absent = &struct{ absent bool }{}

// Stamp is an install stamp naming the build commit as Hermes's writer
// lays one out (schemaVersion 2, two-space indentation, a final newline),
// the fields given replacing its own (Absent ones left out).
func Stamp(commit string, with map[string]any) string {
	stamp := map[string]any{
		"schemaVersion":   2,
		"commit":          commit,
		"branch":          "main",
		"builtAt":         "2026-01-01T00:00:00+00:00",
		"dirty":           false,
		"source":          "ci",
		"distribution":    "docker",
		"updateMechanism": "external",
		"baseVersion":     "0.19.0",
		"displayVersion":  "0.19.0",
		"distance":        nil,
		"payload":         "bootstrap",
		"tag":             nil,
	}
	for k, v := range with {
		stamp[k] = v
		if v == Absent {
			delete(stamp, k)
		}
	}
	data, err := json.MarshalIndent(stamp, "", "  ")
	if err != nil {
		panic(err) // a map of JSON values
	}
	return string(data) + "\n"
}

// Install makes an install without Git in dir: run_agent.py and, where
// commit is not empty, the build stamp naming it. It returns the module.
func Install(tb testing.TB, dir, commit string) string {
	tb.Helper()
	module := filepath.Join(dir, "run_agent.py")
	WriteFile(tb, module, "class AIAgent: pass\n")
	if commit != "" {
		WriteFile(tb, filepath.Join(dir, StampFile), Stamp(commit, nil))
	}
	return module
}

// Replace writes content to a new file beside path and renames it over
// path, as rsync and package managers replace a file: another file stands
// at path after it.
func Replace(tb testing.TB, path, content string) {
	tb.Helper()
	tmp := path + ".new"
	WriteFile(tb, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

// Overwrite writes content into the file at path itself (truncated,
// then written), as an edit in place does: the same file stands at path
// after it.
func Overwrite(tb testing.TB, path, content string) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}
