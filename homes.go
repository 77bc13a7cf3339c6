package runtimeguard

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// maxProfileHomes bounds the profile homes a guard reads the updater's
// files in.
const maxProfileHomes = 64

// updaterHomes is where an updater may keep its files: the guard's home
// and, for a layout with profiles, the root those profiles share and every
// profile home under it. The profile homes are listed again when the
// profiles directory changes.
type updaterHomes struct {
	home     string // the guard's own home, absolute
	root     string // the root of the profiles; home where there are none
	profiles string // Layout.Profiles; "" for none
	now      func() time.Time

	mu    sync.Mutex // protects stamp and list
	stamp gitread.Stamp
	list  []string // the homes under root/profiles, as last listed
}

func newUpdaterHomes(home, profiles string, now func() time.Time) *updaterHomes {
	h := &updaterHomes{home: home, root: home, profiles: profiles, now: now}
	if profiles != "" && filepath.Base(filepath.Dir(home)) == profiles {
		h.root = filepath.Dir(filepath.Dir(home))
	}
	return h
}

// all returns the homes, the guard's own first.
func (h *updaterHomes) all() []string {
	homes := []string{h.home}
	if h.profiles == "" {
		return homes
	}
	if h.root != h.home {
		homes = append(homes, h.root)
	}
	for _, p := range h.profileHomes() {
		if !slices.Contains(homes, p) {
			homes = append(homes, p)
		}
	}
	return homes
}

// profileHomes lists the directories of root/profiles whose names do not
// start with a dot, through the last listing while the directory's stamp
// is the same and settled.
func (h *updaterHomes) profileHomes() []string {
	dir := filepath.Join(h.root, h.profiles)
	st, err := gitread.StatStamp(dir)
	if err != nil || !st.Present() || !st.IsDir() {
		return nil
	}
	h.mu.Lock()
	if h.list != nil && h.stamp == st {
		defer h.mu.Unlock()
		return h.list
	}
	h.mu.Unlock()
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	names, _ := f.Readdirnames(4 * maxProfileHomes)
	f.Close()
	slices.Sort(names)
	list := []string{}
	for _, n := range names {
		if strings.HasPrefix(n, ".") || len(list) == maxProfileHomes {
			continue
		}
		p := filepath.Join(dir, n)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			list = append(list, p)
		}
	}
	if st.Settled(h.now()) {
		h.mu.Lock()
		h.stamp, h.list = st, list
		h.mu.Unlock()
	}
	return list
}

// markerPaths are the marker's paths in every home, the guard's own first.
func (c *config) markerPaths() []string {
	if c.homes == nil {
		return nil
	}
	var paths []string
	for _, home := range c.homes.all() {
		paths = append(paths, filepath.Join(home, c.markerRel))
	}
	return paths
}

// receiptSources are where every home keeps its receipts.
func (c *config) receiptSources() []updater.ReceiptSource {
	if c.homes == nil || c.receiptRel == "" && c.historyRel == "" {
		return nil
	}
	var srcs []updater.ReceiptSource
	for _, home := range c.homes.all() {
		var s updater.ReceiptSource
		if c.receiptRel != "" {
			s.Latest = filepath.Join(home, c.receiptRel)
		}
		if c.historyRel != "" {
			s.History = filepath.Join(home, c.historyRel)
		}
		srcs = append(srcs, s)
	}
	return srcs
}
