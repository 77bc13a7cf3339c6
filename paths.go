package runtimeguard

import (
	"path/filepath"
	"slices"
)

// Paths are the files and directories a guard's [Options] resolve to:
// resolved once, by [New], with every default applied
// and every path absolute, and used by everything the guard reads after.
// A later change of the working directory or of the environment moves
// none of them.
type Paths struct {
	// Home is the updater's home directory: [Options.HomeDir], else the
	// Layout's HomeEnv variable, else its DefaultHome under the user's home
	// directory. Empty when none is known, and so are Marker, Receipt,
	// ReceiptHistory and Lock.
	Home string `json:"home"`
	// Marker is the update marker in Home, where an updater that speaks
	// the protocol claims it. Where the layout has profiles, the markers
	// of the other homes are read too (see [Layout].Profiles).
	Marker string `json:"marker"`
	// Receipt is the updater's latest receipt in Home; empty when the
	// layout has none.
	Receipt string `json:"receipt,omitempty"`
	// ReceiptHistory is the pattern of the receipts the updater keeps of
	// each run, in Home; empty when the layout has none.
	ReceiptHistory string `json:"receipt_history,omitempty"`
	// Lock is the updater's lock file in Home; empty when the layout has
	// none.
	Lock string `json:"lock,omitempty"`
	// Python is [Options.Python], absolute (its links not resolved); empty
	// when none was given.
	Python string `json:"python,omitempty"`
	// InstallRoot is <root> for a Python at <root>/venv/bin (or .venv, or
	// Scripts): the install root searched for recovery markers beside the
	// module's source directory. Empty when Python is in no venv.
	InstallRoot string `json:"install_root,omitempty"`
	// RecoveryMarkers are the file names of the recovery markers searched
	// for in the install roots.
	RecoveryMarkers []string `json:"recovery_markers"`
}

// Paths returns the paths the guard's options resolved to at [New]. A
// tool that writes the updater's files, or shows where a guard would look,
// makes a guard with no [Options.ModulePath] for them: New then reads
// neither the checkout nor the updater's files.
func (g *Guard) Paths() Paths {
	return g.config().paths()
}

// paths returns the resolved paths, in a copy the caller may keep.
func (c *config) paths() Paths {
	p := Paths{
		Marker:          c.markerPath,
		Receipt:         c.receiptPath,
		Lock:            c.lockPath,
		Python:          c.python,
		InstallRoot:     c.installRoot,
		RecoveryMarkers: nonNil(slices.Clone(c.recovery)),
	}
	if c.homes != nil {
		p.Home = c.homes.home
		if c.historyRel != "" {
			p.ReceiptHistory = filepath.Join(p.Home, c.historyRel)
		}
	}
	return p
}

// installRoots are the directories searched for recovery markers for the
// installs whose source directories are srcs: each of them, then the
// interpreter's install root, once each.
func (c *config) installRoots(srcs ...string) []string {
	var roots []string
	for _, dir := range append(srcs, c.installRoot) {
		if dir == "" {
			continue
		}
		if dir = filepath.Clean(dir); !slices.Contains(roots, dir) {
			roots = append(roots, dir)
		}
	}
	return roots
}
