package runtimeguard

import (
	"path"
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
	// Receipt is the updater's latest receipt, relative to the home: the
	// file it rewrites after each run. Empty: none.
	Receipt string
	// ReceiptHistory names the receipts the updater keeps of each run,
	// relative to the home, its last element a pattern as [path.Match]
	// takes it, such as "logs/update_receipts/update_*.json". The newest
	// receipt of these and Receipt is the one that counts: an updater may
	// write its own run's file and leave an older run's latest receipt.
	// Empty: none. With neither Receipt nor ReceiptHistory, no reload is
	// ever planned.
	ReceiptHistory string
	// Lock is the lock file the updater holds while it runs, relative to
	// the home: a reload plan holds it shared until the new code is bound.
	// Empty: the updater takes none.
	Lock string
	// CheckoutLock is the file name of the kernel lock the updater holds
	// on the checkout it updates, for its whole process tree (its
	// children inherit it): in the checkout's common Git directory, or,
	// with a dot before it, in an install root without .git. While any
	// process holds it an update is in progress, whatever the marker
	// says. Empty: the updater takes none.
	CheckoutLock string
	// Profiles names the directory of a home that holds the homes of
	// named profiles, which share its install, such as "profiles". The
	// updater may run in any of them: a guard whose home is
	// <root>/<Profiles>/<name> or <root> reads the marker and the receipts
	// of <root> and of every profile home under it. Past 64 profile homes
	// (or a profiles directory that cannot be listed) none is read, and
	// the marker is unknown: a home that is not read may hold an update
	// in progress, so no reload is proven. Empty: only the guard's own
	// home.
	Profiles string
}

// HermesLayout is the layout of the Hermes Agent's updater (hermes
// update), which the zero [Layout] stands for: home $HERMES_HOME or
// ~/.hermes, marker .hermes-update-in-progress, recovery markers
// .update-incomplete and .lazy-refresh-incomplete, receipts
// logs/update_receipts/latest.json and the retained
// logs/update_receipts/update_*.json, named profiles' homes under
// profiles, no lock file in the home, and the checkout lock
// hermes-update.lock.
//
// Hermes's updater keeps the marker in the root of its homes ($HERMES_HOME,
// else ~/.hermes, less any profiles/<name>; older ones in the profile's
// home) and the receipts in the home of the profile it updates for, which
// may be <root>/profiles/<name>: so a guard reads both, wherever its own
// home is. Copy it to describe an
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
		ReceiptHistory:  "logs/update_receipts/update_*.json",
		CheckoutLock:    "hermes-update.lock",
		Profiles:        "profiles",
	}
}

// isZero reports whether l is the zero Layout.
func (l *Layout) isZero() bool {
	return l.HomeEnv == "" && l.DefaultHome == "" && l.Marker == "" &&
		len(l.RecoveryMarkers) == 0 && l.Receipt == "" && l.ReceiptHistory == "" && l.Lock == "" && l.CheckoutLock == "" && l.Profiles == ""
}

// validate checks that every path stays inside the home and every recovery
// marker is a file name.
func (l *Layout) validate() error {
	if l.Marker == "" {
		return optionError("Layout.Marker", "", "is empty: a Layout other than the zero one is taken as it is; copy HermesLayout to change some of its fields")
	}
	for _, f := range []struct{ name, path string }{
		{"DefaultHome", l.DefaultHome}, {"Marker", l.Marker}, {"Receipt", l.Receipt},
		{"ReceiptHistory", l.ReceiptHistory}, {"Lock", l.Lock}, {"Profiles", l.Profiles},
	} {
		if f.path != "" && !filepath.IsLocal(filepath.FromSlash(f.path)) {
			return optionError("Layout."+f.name, f.path, "is not a relative path that stays inside its directory")
		}
	}
	if l.ReceiptHistory != "" {
		if _, err := path.Match(path.Base(l.ReceiptHistory), ""); err != nil || strings.ContainsAny(path.Dir(l.ReceiptHistory), "*?[\\") {
			return optionError("Layout.ReceiptHistory", l.ReceiptHistory, "is not a directory and a file name pattern")
		}
	}
	if l.CheckoutLock != "" && (strings.ContainsAny(l.CheckoutLock, `/\`) || !filepath.IsLocal(l.CheckoutLock)) {
		return optionError("Layout.CheckoutLock", l.CheckoutLock, "is not a file name")
	}
	if l.Profiles != "" && strings.ContainsAny(l.Profiles, `/\`) {
		return optionError("Layout.Profiles", l.Profiles, "is not a directory name")
	}
	for _, name := range l.RecoveryMarkers {
		if name == "" || strings.ContainsAny(name, `/\`) || !filepath.IsLocal(name) {
			return optionError("Layout.RecoveryMarkers", name, "is not a file name")
		}
	}
	return nil
}
