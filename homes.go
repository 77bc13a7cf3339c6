package runtimeguard

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// maxProfileHomes bounds the profile homes a guard reads the updater's
// files in, and maxProfileEntries the entries of the profiles directory it
// reads to find them: past either, the homes are not read, and the
// updater's files are unknown (they prove nothing), never a part of them
// taken for all.
const (
	maxProfileHomes   = 64
	maxProfileEntries = 4096
)

// updaterHomes is where an updater may keep its files: the guard's home
// and, for a layout with profiles, the root those profiles share and every
// profile home under it. The profile homes are listed again when the
// profiles directory changes.
type updaterHomes struct {
	home     string // the guard's own home, absolute
	root     string // the root of the profiles; home where there are none
	profiles string // Layout.Profiles; "" for none
	now      func() time.Time

	mu      sync.Mutex // protects stamp, list and problem
	stamp   fsread.Stamp
	list    []string // the homes under root/profiles, as last listed
	problem string   // why that listing is not whole, or ""
}

// newUpdaterHomes is the homes of a guard whose home is home (absolute).
// A home is a profile home by what it is, not how it is spelt: its links
// resolved (a ~/.hermes-work that leads to <root>/profiles/work), a home
// under the profiles directory has the root above it. The links are
// resolved on x, waited for at most timeout: a home on a file system
// that does not answer is taken as spelt.
func newUpdaterHomes(home, profiles string, now func() time.Time, x *bounded.Executor, timeout time.Duration) *updaterHomes {
	h := &updaterHomes{home: home, root: home, profiles: profiles, now: now}
	if profiles == "" {
		return h
	}
	real := filepath.Clean(home)
	if t, stuck := bounded.Submit(context.Background(), x, nil, timeout, func(t *bounded.Task[string]) {
		t.Val, _ = filepath.EvalSymlinks(home)
	}, nil); stuck == nil && t.Err == nil && t.Val != "" {
		real = t.Val
	}
	if filepath.Base(filepath.Dir(real)) == profiles {
		h.root = filepath.Dir(filepath.Dir(real))
	}
	return h
}

// realRoot is the root of the homes, its links resolved (a receipt that
// names no checkout proves a reload only of a checkout inside it), or why
// it cannot be told.
func (h *updaterHomes) realRoot() (root, why string) {
	if h == nil {
		return "", "no home directory is known"
	}
	root, err := filepath.EvalSymlinks(h.root)
	if err != nil {
		return "", "the homes' root " + h.root + " cannot be resolved: " + err.Error()
	}
	return root, ""
}

// all returns the homes, the guard's own first, and why the list is not
// whole ("" when it is): a profile home that is not read may hold a
// marker or a newer receipt, so a list that is not whole proves nothing.
func (h *updaterHomes) all() ([]string, string) {
	homes, _, problem := h.allAndLinks()
	return homes, problem
}

// allAndLinks is all, and also returns the links of the profiles
// directory that lead to no directory (see listProfileHomes).
func (h *updaterHomes) allAndLinks() (homes, links []string, problem string) {
	homes = []string{h.home}
	if h.profiles == "" {
		return homes, nil, ""
	}
	if h.root != h.home {
		homes = append(homes, h.root)
	}
	profiles, links, problem := h.profileHomes()
	for _, p := range profiles {
		if !slices.Contains(homes, p) {
			homes = append(homes, p)
		}
	}
	return homes, links, problem
}

// profileHomes lists the directories of root/profiles whose names do not
// start with a dot, through the last listing while the directory's stamp
// is the same and settled, and says why the list is not whole: the
// directory could not be read, or holds more than maxProfileHomes homes.
// links are the directory's links that lead to no directory: a listing
// that found one is not kept, as what it leads to can become a home
// while the directory's stamp stays the same.
func (h *updaterHomes) profileHomes() (list, links []string, problem string) {
	dir := filepath.Join(h.root, h.profiles)
	st, err := fsread.StatStamp(dir)
	if err != nil {
		return nil, nil, "the profile homes " + dir + " cannot be listed: " + err.Error()
	}
	if !st.Present() || !st.IsDir() {
		return nil, nil, ""
	}
	h.mu.Lock()
	if h.list != nil && h.stamp == st {
		defer h.mu.Unlock()
		return h.list, nil, h.problem
	}
	h.mu.Unlock()
	list, links, problem = listProfileHomes(dir)
	if len(links) == 0 && st.Settled(h.now()) {
		h.mu.Lock()
		h.stamp, h.list, h.problem = st, list, problem
		h.mu.Unlock()
	}
	return list, links, problem
}

// listProfileHomes lists the profile homes of dir, at most maxProfileHomes
// of them, reading at most maxProfileEntries entries, and the symbolic
// links in it that lead to no directory (dangling, or to something else):
// whether one is a home can change with no change of dir.
func listProfileHomes(dir string) (list, links []string, problem string) {
	names, err := fsread.ReadNames(dir, maxProfileEntries, func(n string) bool { return !strings.HasPrefix(n, ".") })
	if err != nil {
		return []string{}, nil, "the profile homes cannot be listed: " + err.Error()
	}
	slices.Sort(names)
	list = []string{}
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir():
			// Removed, a dangling link, or no directory.
			if li, err := os.Lstat(p); err == nil && li.Mode()&fs.ModeSymlink != 0 {
				links = append(links, p)
			}
			continue
		case err != nil:
			return []string{}, nil, "the profile home " + p + " cannot be read: " + err.Error()
		}
		if len(list) == maxProfileHomes {
			return []string{}, nil, fmt.Sprintf("%s holds more than %d profile homes: they are not read", dir, maxProfileHomes)
		}
		list = append(list, p)
	}
	return list, links, ""
}

// markerPathsAndLinks returns the marker's paths in every home, the
// guard's own first, the links of the profiles directory that lead to no
// directory (see listProfileHomes), and why the homes are not all known.
func (c *config) markerPathsAndLinks() (paths, links []string, problem string) {
	if c.homes == nil {
		return nil, nil, ""
	}
	homes, links, problem := c.homes.allAndLinks()
	for _, home := range homes {
		paths = append(paths, filepath.Join(home, c.markerRel))
	}
	return paths, links, problem
}

// receiptSources are where every home keeps its receipts, and why they
// are not all of them ("" when they are).
func (c *config) receiptSources() ([]updater.ReceiptSource, string) {
	if c.homes == nil || c.receiptRel == "" && c.historyRel == "" {
		return nil, ""
	}
	homes, problem := c.homes.all()
	var srcs []updater.ReceiptSource
	for _, home := range homes {
		var s updater.ReceiptSource
		if c.receiptRel != "" {
			s.Latest = filepath.Join(home, c.receiptRel)
		}
		if c.historyRel != "" {
			s.History = filepath.Join(home, c.historyRel)
		}
		srcs = append(srcs, s)
	}
	return srcs, problem
}
