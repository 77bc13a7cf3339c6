// Package updater reads and writes the files an updater and a guarded
// server share: the in-progress marker, the receipts, the recovery
// markers, and the locks.
//
// A marker's verdict (Env.ClassifyMarker) is a Life: no update, an update
// that ended, one that may live, or a live one. A guard names it in its
// own words; a writer's claim of the marker obeys it (Judge).
//
// Where things are:
//
//   - marker.go: the marker's format, its safe read (SafeOpen), the
//     recovery markers; classify.go: what a marker proves; identity.go:
//     the processes a marker or a receipt names; cache.go: parses spared
//     while a file is unchanged.
//   - proc.go: the probe of a process, with its platform halves in
//     proc_unix.go, proc_windows.go and proc_other.go, and when a process
//     started in proc_linux.go, proc_darwin.go, proc_windows.go and
//     proc_nostart.go.
//   - receipt.go: the receipt's format; receipts.go: listing receipts,
//     finding the newest, pruning old ones.
//   - lock.go and lock_*.go: the layout's lock file; checkout.go and
//     checkout_*.go: the checkout lock, found as git finds the repository,
//     and a checkout's identity.
//   - write.go: the writer's claim and release of the marker and its
//     receipts; run.go: a whole run of an updater's command (Run).
//   - stamp.go: install stamps; pynumber.go: numbers read as Python reads
//     them.
//
// The careful open itself is package fsread's, shared by every read of a
// file that may not be trusted.
package updater
