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
	receipts map[string]cachedReceipt // parses of receipt files, by path
	// The marker's parse, while its stamp is stamp.
	path    string
	stamp   fsread.Stamp
	pid     int64
	started float64
	ids     Identities
	proc    *procHandle          // the marker's process, where the platform keeps one
	closed  bool                 // its guard was closed: no process handle is kept
	dirs    map[string]cachedDir // listings of marker directories, by path
}

// cachedReceipt is the parse of a receipt file while its stamp is stamp.
type cachedReceipt struct {
	stamp fsread.Stamp
	r     *Receipt
	why   string
}

// maxCachedReceipts bounds the receipts a Cache keeps: beyond it, the
// cache starts over.
const maxCachedReceipts = 2 * MaxReceiptFiles

// receipt returns the cached parse of the receipt at path, when its stamp
// is still st.
func (c *Cache) receipt(path string, st fsread.Stamp) (*Receipt, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.receipts[path]
	if !ok || e.stamp != st {
		return nil, "", false
	}
	return e.r, e.why, true
}

// rememberReceipt keeps the parse of the receipt at path, stamped st.
func (c *Cache) rememberReceipt(path string, st fsread.Stamp, r *Receipt, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.receipts == nil || len(c.receipts) >= maxCachedReceipts {
		c.receipts = make(map[string]cachedReceipt)
	}
	c.receipts[path] = cachedReceipt{st, r, why}
}

// cachedDir is the artifacts found beside a marker while the directory's
// stamp is stamp.
type cachedDir struct {
	stamp fsread.Stamp
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
			return ProcInfo{State: ProcessAlive, Start: h.start}
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
	d, ok := c.dirs[dir]
	if !ok || d.stamp != st {
		return nil, "", false
	}
	return d.names, d.why, true
}

// rememberDir keeps the artifacts of dir, stamped st.
func (c *Cache) rememberDir(dir string, st fsread.Stamp, names []string, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs == nil || len(c.dirs) > 64 {
		c.dirs = make(map[string]cachedDir)
	}
	c.dirs[dir] = cachedDir{st, names, why}
}
