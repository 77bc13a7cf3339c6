package updater

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/durable"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// Bounds of a scan of the receipts' directories: an updater keeps a few
// dozen receipts a home (Hermes's keeps 20, in each profile's home); a
// source with more than these is not searched further, and proves
// nothing. The bound is a source's, not one over all sources: an install
// of many profiles keeps 20 receipts in each.
const (
	MaxReceiptFiles   = 128  // retained receipts considered, a source
	maxReceiptEntries = 4096 // directory entries read, a directory
)

// ReceiptSource is where one home keeps its receipts: Latest, the file an
// updater rewrites after each run, and History, a pattern (as
// filepath.Match takes it) naming the receipts it keeps of each run in the
// same or another directory. Either may be empty.
type ReceiptSource struct {
	Latest  string
	History string
}

// ReceiptFiles is what a scan of the receipts' sources found: the stamp
// (lstat) of every receipt file, by path, and why the scan is incomplete
// ("" when it is whole). Two scans compare file by file: a receipt whose
// stamp is in both was not written in between.
type ReceiptFiles struct {
	Stamps  map[string]fsread.Stamp
	Problem string
}

// ListReceipts stamps the receipt files of every source: each Latest that
// exists, and every file of a History directory whose name matches its
// pattern. A missing directory holds no receipts. It reads no receipt.
func ListReceipts(sources []ReceiptSource) ReceiptFiles {
	rf := ReceiptFiles{Stamps: make(map[string]fsread.Stamp)}
	add := func(path string) bool {
		if _, ok := rf.Stamps[path]; ok {
			return true
		}
		st, err := fsread.LstatStamp(path)
		if err != nil {
			rf.Problem = err.Error()
			return false
		}
		if st.Present() {
			rf.Stamps[path] = st
		}
		return true
	}
	for _, src := range sources {
		if src.Latest != "" && !add(src.Latest) {
			return rf
		}
		if src.History == "" {
			continue
		}
		dir, pattern := filepath.Split(src.History)
		names, err := matchingNames(dir, pattern)
		if err != nil {
			rf.Problem = err.Error()
			return rf
		}
		if len(names) > MaxReceiptFiles {
			rf.Problem = fmt.Sprintf("more than %d receipts are kept in %s", MaxReceiptFiles, dir)
			return rf
		}
		for _, name := range names {
			if !add(filepath.Join(dir, name)) {
				return rf
			}
		}
	}
	return rf
}

// matchingNames lists the names in dir that match pattern, reading at
// most maxReceiptEntries entries; a missing directory has none, and so has
// a file (or a FIFO) where the directory would be.
func matchingNames(dir, pattern string) ([]string, error) {
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("receipt pattern %q: %w", pattern, err)
	}
	dir = filepath.Clean(dir) // as filepath.Split left it, with its slash
	names, err := fsread.ReadNames(dir, maxReceiptEntries, func(n string) bool {
		ok, _ := filepath.Match(pattern, n)
		return ok
	})
	if err != nil {
		if st, serr := fsread.StatStamp(dir); serr == nil && st.Present() && !st.IsDir() {
			return nil, nil // something else where the directory would be: no receipts
		}
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// FoundReceipt is a receipt as read from its file.
type FoundReceipt struct {
	Receipt
	Path string
}

// NewestReceipt reads the receipts of files that are in now and not in
// before with the same stamp (every file of now when before is nil): the
// receipts written since before was listed. Of those that name no
// checkout or the checkout whose identity (CheckoutID) is checkoutID (a
// receipt of another checkout, or of one it names without an identity,
// says nothing of this one), it returns the
// newest by finished_at (a receipt still running is newer than any
// finished one), then started_at; nil when none was written. A receipt file among them
// that cannot be read or parsed (a receipt being written in place, a
// link, another schema) might be the newest, so the answer is then a
// problem, never an older receipt; so it is when the newest ones
// disagree, or when either listing is incomplete.
//
// Parses are cached by the file's stamp when the Env has a Cache: a
// receipt is parsed once per change of its file.
func (e *Env) NewestReceipt(now ReceiptFiles, before *ReceiptFiles, checkoutID string) (*FoundReceipt, string) {
	if now.Problem != "" {
		return nil, "the receipts cannot be listed: " + now.Problem
	}
	if before != nil && before.Problem != "" {
		return nil, "the receipts could not be listed before: " + before.Problem
	}
	paths := make([]string, 0, len(now.Stamps))
	for p, st := range now.Stamps {
		if before != nil {
			if old, ok := before.Stamps[p]; ok && old == st {
				continue
			}
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var found []*FoundReceipt
	for _, p := range paths {
		r, why := e.readReceiptFile(p, now.Stamps[p])
		if why != "" {
			return nil, "the receipt " + p + " is not usable: " + why
		}
		if (r.Checkout != "" || r.CheckoutID != "") && (r.CheckoutID == "" || r.CheckoutID != checkoutID) {
			continue
		}
		found = append(found, &FoundReceipt{Receipt: *r, Path: p})
	}
	if len(found) == 0 {
		return nil, ""
	}
	sort.SliceStable(found, func(i, j int) bool { return newer(&found[i].Receipt, &found[j].Receipt) })
	top := found[0]
	for _, f := range found[1:] {
		if newer(&top.Receipt, &f.Receipt) {
			break
		}
		if f.Outcome != top.Outcome || f.To != top.To {
			return nil, fmt.Sprintf("the receipts %s and %s are equally new and disagree (%s for %s, %s for %s)",
				top.Path, f.Path, top.Outcome, orNone(top.To), f.Outcome, orNone(f.To))
		}
	}
	return top, ""
}

// newer reports whether a is newer than b: finished later (a running
// receipt, unfinished, is the newest), or finished at the same time and
// started later.
func newer(a, b *Receipt) bool {
	af, bf := a.FinishedAt, b.FinishedAt
	switch {
	case af.IsZero() != bf.IsZero():
		return af.IsZero()
	case !af.Equal(bf):
		return af.After(bf)
	}
	return a.StartedAt.After(b.StartedAt)
}

func orNone(s string) string {
	if s == "" {
		return "no revision"
	}
	return s
}

// readReceiptFile reads and parses the receipt at path, which the listing
// stamped st: through the cache while the stamp is the same, and without
// caching anything of a file that changed since, or is too recent for its
// stamp to tell a rewrite (a receipt being written in place).
func (e *Env) readReceiptFile(path string, st fsread.Stamp) (*Receipt, string) {
	if e.Cache != nil {
		if r, why, ok := e.Cache.receipt(path, st); ok {
			return r, why
		}
	}
	r, why := e.parseReceiptFile(path, st)
	if after, err := fsread.LstatStamp(path); err != nil || after != st {
		return nil, "changed while it was read"
	}
	if e.Cache != nil && st.Settled(e.Now()) {
		e.Cache.rememberReceipt(path, st, r, why)
	}
	return r, why
}

func (e *Env) parseReceiptFile(path string, st fsread.Stamp) (*Receipt, string) {
	body, kind, why := e.Open(path, MaxReceiptBytes)
	switch kind {
	case FileAbsent:
		return nil, "removed while it was read"
	case FileUnusable:
		return nil, why
	}
	r, err := ParseReceipt(body)
	if err != nil {
		return nil, err.Error()
	}
	return &r, ""
}

// ReceiptFileName is the name WriteReceipt gives the receipt it keeps of a
// finished run.
func ReceiptFileName(r *Receipt, pid int) string {
	return "update_" + r.StartedAt.UTC().Format("20060102T150405Z") + "_" + strconv.Itoa(pid) + "_" + r.UpdateID + ".json"
}

// keepReceipts is how many receipts of finished runs WriteReceipt keeps.
const keepReceipts = 20

// pruneReceipts removes all but the newest keepReceipts files of d named
// by pattern, by modification time, telling step of each file it reads or
// removes (see Update.Step).
func pruneReceipts(d *durable.Dir, pattern string, step func(string, time.Duration)) {
	step("the receipts' directory "+d.Path(), 0)
	names, err := d.Names(maxReceiptEntries, func(n string) bool {
		ok, _ := filepath.Match(pattern, n)
		return ok
	})
	if err != nil || len(names) <= keepReceipts {
		return
	}
	type file struct {
		name  string
		mtime time.Time
	}
	var files []file
	for _, n := range names {
		step("the receipt "+filepath.Join(d.Path(), n), 0)
		if fi, err := d.Lstat(n); err == nil && fi.Mode().IsRegular() {
			files = append(files, file{n, fi.ModTime()})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mtime.After(files[j].mtime) })
	for _, f := range files[min(keepReceipts, len(files)):] {
		step("the receipt "+filepath.Join(d.Path(), f.name), 0)
		_ = d.Remove(f.name)
	}
}

// ReceiptHistoryPattern names the receipts WriteReceipt keeps beside the
// latest one, as Hermes's updater names its own.
const ReceiptHistoryPattern = "update_*.json"
