package runtimeguard

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

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

func newUpdaterHomes(home, profiles string, now func() time.Time) *updaterHomes {
	h := &updaterHomes{home: home, root: home, profiles: profiles, now: now}
	if profiles != "" && filepath.Base(filepath.Dir(home)) == profiles {
		h.root = filepath.Dir(filepath.Dir(home))
	}
	return h
}

// all returns the homes, the guard's own first, and why the list is not
// whole ("" when it is): a profile home that is not read may hold a
// marker or a newer receipt, so a list that is not whole proves nothing.
func (h *updaterHomes) all() ([]string, string) {
	homes := []string{h.home}
	if h.profiles == "" {
		return homes, ""
	}
	if h.root != h.home {
		homes = append(homes, h.root)
	}
	profiles, problem := h.profileHomes()
	for _, p := range profiles {
		if !slices.Contains(homes, p) {
			homes = append(homes, p)
		}
	}
	return homes, problem
}

// profileHomes lists the directories of root/profiles whose names do not
// start with a dot, through the last listing while the directory's stamp
// is the same and settled, and says why the list is not whole: the
// directory could not be read, or holds more than maxProfileHomes homes.
func (h *updaterHomes) profileHomes() ([]string, string) {
	dir := filepath.Join(h.root, h.profiles)
	st, err := fsread.StatStamp(dir)
	if err != nil {
		return nil, "the profile homes " + dir + " cannot be listed: " + err.Error()
	}
	if !st.Present() || !st.IsDir() {
		return nil, ""
	}
	h.mu.Lock()
	if h.list != nil && h.stamp == st {
		defer h.mu.Unlock()
		return h.list, h.problem
	}
	h.mu.Unlock()
	list, problem := listProfileHomes(dir)
	if st.Settled(h.now()) {
		h.mu.Lock()
		h.stamp, h.list, h.problem = st, list, problem
		h.mu.Unlock()
	}
	return list, problem
}

// listProfileHomes lists the profile homes of dir, at most maxProfileHomes
// of them, reading at most maxProfileEntries entries.
func listProfileHomes(dir string) ([]string, string) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, ""
	}
	if err != nil {
		return []string{}, "the profile homes " + dir + " cannot be listed: " + err.Error()
	}
	defer f.Close()
	var names []string
	for {
		batch, err := f.Readdirnames(256)
		names = append(names, batch...)
		if len(names) > maxProfileEntries {
			return []string{}, fmt.Sprintf("%s has more than %d entries: its profile homes are not read", dir, maxProfileEntries)
		}
		if err == io.EOF || len(batch) == 0 {
			break
		}
		if err != nil {
			return []string{}, "the profile homes " + dir + " cannot be listed: " + err.Error()
		}
	}
	slices.Sort(names)
	list := []string{}
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue
		}
		p := filepath.Join(dir, n)
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed, or a dangling link
		case err != nil:
			return []string{}, "the profile home " + p + " cannot be read: " + err.Error()
		case !fi.IsDir():
			continue
		}
		if len(list) == maxProfileHomes {
			return []string{}, fmt.Sprintf("%s holds more than %d profile homes: they are not read", dir, maxProfileHomes)
		}
		list = append(list, p)
	}
	return list, ""
}

// markerPaths are the marker's paths in every home, the guard's own first.
func (c *config) markerPaths() ([]string, string) {
	if c.homes == nil {
		return nil, ""
	}
	homes, problem := c.homes.all()
	var paths []string
	for _, home := range homes {
		paths = append(paths, filepath.Join(home, c.markerRel))
	}
	return paths, problem
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
