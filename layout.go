package runtimeguard

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Layout describes where an updater keeps the files a guard reads: its home
// directory, the marker it keeps while it runs, the recovery markers an
// interrupted update leaves in an install root, the receipt it writes after
// each run, and the lock file it holds while it runs. Paths are relative to
// the home directory.
//
// The zero Layout is [HermesLayout]. Any other Layout is taken as it is: a
// field left empty means the updater has no such file.
type Layout struct {
	// HomeEnv names the environment variable that holds the home
	// directory, such as "HERMES_HOME". Empty: none.
	HomeEnv string
	// DefaultHome is the home directory, relative to the user's home
	// directory, when HomeEnv is unset or empty, such as ".hermes". Empty:
	// none, and without [Options.HomeDir] the home is unknown.
	DefaultHome string
	// Marker is the in-progress marker, relative to the home. Required.
	Marker string
	// RecoveryMarkers are the file names of the recovery markers an
	// interrupted update leaves in an install root.
	RecoveryMarkers []string
	// Receipt is the updater's latest receipt, relative to the home.
	// Empty: the updater writes none, and no reload is ever planned.
	Receipt string
	// Lock is the lock file the updater holds while it runs, relative to
	// the home: a reload plan holds it shared until the new code is bound.
	// Empty: the updater takes none.
	Lock string
}

// HermesLayout is the layout of the Hermes Agent's updater (hermes
// update), which the zero [Layout] stands for: home $HERMES_HOME or
// ~/.hermes, marker .hermes-update-in-progress, recovery markers
// .update-incomplete and .lazy-refresh-incomplete, receipt
// logs/update_receipts/latest.json, no lock file. Copy it to describe an
// updater that differs in a field; changing it changes nothing else (the
// zero Layout keeps meaning the Hermes layout).
var HermesLayout = hermesLayout()

// hermesLayout returns a fresh copy of the Hermes layout.
func hermesLayout() Layout {
	return Layout{
		HomeEnv:         "HERMES_HOME",
		DefaultHome:     ".hermes",
		Marker:          ".hermes-update-in-progress",
		RecoveryMarkers: []string{".update-incomplete", ".lazy-refresh-incomplete"},
		Receipt:         "logs/update_receipts/latest.json",
	}
}

// isZero reports whether l is the zero Layout.
func (l *Layout) isZero() bool {
	return l.HomeEnv == "" && l.DefaultHome == "" && l.Marker == "" &&
		len(l.RecoveryMarkers) == 0 && l.Receipt == "" && l.Lock == ""
}

// validate checks that every path stays inside the home and every recovery
// marker is a file name.
func (l *Layout) validate() error {
	if l.Marker == "" {
		return fmt.Errorf("runtimeguard: Layout.Marker is empty: a Layout other than the zero one is taken as it is; copy HermesLayout to change some of its fields")
	}
	for _, f := range []struct{ name, path string }{
		{"DefaultHome", l.DefaultHome}, {"Marker", l.Marker}, {"Receipt", l.Receipt}, {"Lock", l.Lock},
	} {
		if f.path != "" && !filepath.IsLocal(filepath.FromSlash(f.path)) {
			return fmt.Errorf("runtimeguard: Layout.%s %q is not a relative path that stays inside its directory", f.name, f.path)
		}
	}
	for _, name := range l.RecoveryMarkers {
		if name == "" || strings.ContainsAny(name, `/\`) || !filepath.IsLocal(name) {
			return fmt.Errorf("runtimeguard: Layout.RecoveryMarkers: %q is not a file name", name)
		}
	}
	return nil
}
