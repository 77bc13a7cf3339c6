package updater

import (
	"sync"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// Cache keeps what a look at an unchanged updater file would read again
// for nothing, each while the file's stamp is the same: the parses of
// receipt files (a receipt is parsed once per change of its file); the
// parse of one marker, the start time of its process (while the platform
// can tell it is the same process) and the artifacts beside it (while its
// directory's stamp is the same). A stale check then costs an lstat of
// the marker and its directory and a liveness probe. The zero Cache is
// empty and ready; it is safe for concurrent use.
type Cache struct {
	mu       sync.Mutex               // protects the fields below
	receipts stampMemo[cachedReceipt] // parses of receipt files, by path
	// The marker's parse, while its stamp is stamp.
	path    string
	stamp   fsread.Stamp
	pid     int64
	started float64
	ids     Identities
	proc    *procHandle          // the marker's process, where the platform keeps one
	closed  bool                 // its guard was closed: no process handle is kept
	dirs    stampMemo[cachedDir] // listings of marker directories, by path
}

// stampMemo keeps a value for each path while the path's stamp is the
// one it was kept with; holding max paths, it starts over. Its Cache's
// lock guards it; the zero stampMemo is empty.
type stampMemo[V any] struct {
	entries map[string]stamped[V]
}

// stamped is a value kept while its path's stamp is stamp.
type stamped[V any] struct {
	stamp fsread.Stamp
	v     V
}

// get returns the value kept for path, when its stamp is still st.
func (m *stampMemo[V]) get(path string, st fsread.Stamp) (V, bool) {
	e, ok := m.entries[path]
	if !ok || e.stamp != st {
		var zero V
		return zero, false
	}
	return e.v, true
}

// put keeps v for path, stamped st.
func (m *stampMemo[V]) put(path string, st fsread.Stamp, v V, max int) {
	if m.entries == nil || len(m.entries) >= max {
		m.entries = make(map[string]stamped[V])
	}
	m.entries[path] = stamped[V]{st, v}
}

// cachedReceipt is the parse of a receipt file.
type cachedReceipt struct {
	r   *Receipt
	why string
}

// maxCachedReceipts bounds the receipts a Cache keeps, and maxCachedDirs
// the marker directories: beyond them, the memo starts over.
const (
	maxCachedReceipts = 2 * MaxReceiptFiles
	maxCachedDirs     = 64
)

// receipt returns the cached parse of the receipt at path, when its stamp
// is still st.
func (c *Cache) receipt(path string, st fsread.Stamp) (*Receipt, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.receipts.get(path, st)
	return e.r, e.why, ok
}

// rememberReceipt keeps the parse of the receipt at path, stamped st.
func (c *Cache) rememberReceipt(path string, st fsread.Stamp, r *Receipt, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.receipts.put(path, st, cachedReceipt{r, why}, maxCachedReceipts)
}

// cachedDir is the artifacts found beside a marker.
type cachedDir struct {
	names []string
	why   string
}

// parsed returns the cached parse of the marker at path, when its stamp is
// still st.
func (c *Cache) parsed(path string, st fsread.Stamp) (pid int64, started float64, ids Identities, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path != path || c.stamp != st || !st.Present() {
		return 0, 0, ids, false
	}
	return c.pid, c.started, c.ids, true
}

// remember keeps the parse of the marker at path, stamped st.
func (c *Cache) remember(path string, st fsread.Stamp, pid int64, started float64, ids Identities) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pid != pid && c.proc != nil {
		c.proc.close()
		c.proc = nil
	}
	c.path, c.stamp, c.pid, c.started, c.ids = path, st, pid, started, ids
}

// probe is e's probe of pid, answered from the process handle while it says the
// same process still lives.
func (c *Cache) probe(e *Env, pid int64) ProcInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.proc; h != nil && h.pid == pid {
		if h.alive() {
			return aliveSince(h.start)
		}
		h.close()
		c.proc = nil
		return ProcInfo{State: ProcessGone}
	}
	info := e.Probe(pid)
	if info.State == ProcessAlive && !info.Start.IsZero() && !c.closed {
		if h := openProc(pid, info.Start); h != nil {
			if c.proc != nil {
				c.proc.close()
			}
			c.proc = h
		}
	}
	return info
}

// Close closes the marker's process handle and keeps none from now on:
// the cache's guard was closed. The parses stay usable. A nil Cache
// holds nothing.
func (c *Cache) Close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.proc != nil {
		c.proc.close()
		c.proc = nil
	}
}

// dir returns the cached artifacts of dir, when its stamp is still st.
func (c *Cache) dir(dir string, st fsread.Stamp) ([]string, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.dirs.get(dir, st)
	return d.names, d.why, ok
}

// rememberDir keeps the artifacts of dir, stamped st.
func (c *Cache) rememberDir(dir string, st fsread.Stamp, names []string, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dirs.put(dir, st, cachedDir{names, why}, maxCachedDirs)
}
