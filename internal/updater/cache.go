package updater

import (
	"sync"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// Cache keeps what a classification of an unchanged marker would read
// again for nothing: the parse of the marker (while its stamp is the same)
// and the start time of its process (while the platform can tell it is the
// same process). A stale check then costs an lstat of the marker and a
// liveness probe. The zero Cache is empty and ready; it is safe for
// concurrent use.
type Cache struct {
	mu      sync.Mutex
	path    string
	stamp   fsread.Stamp
	pid     int64
	started float64
	proc    *procHandle // the marker's process, where the platform keeps one

	receipts map[string]cachedReceipt // parses of receipt files, by path
	dirs     map[string]cachedDir     // listings of marker directories, by path
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

// parsed returns the cached parse of the marker at path, when its stamp is
// still st.
func (c *Cache) parsed(path string, st fsread.Stamp) (pid int64, started float64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path != path || c.stamp != st || !st.Present() {
		return 0, 0, false
	}
	return c.pid, c.started, true
}

// remember keeps the parse of the marker at path, stamped st.
func (c *Cache) remember(path string, st fsread.Stamp, pid int64, started float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pid != pid && c.proc != nil {
		c.proc.close()
		c.proc = nil
	}
	c.path, c.stamp, c.pid, c.started = path, st, pid, started
}

// probe is ProbeProcess, answered from the process handle while it says
// the same process still lives.
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
	if info.State == ProcessAlive && !info.Start.IsZero() {
		if h := openProc(pid, info.Start); h != nil {
			if c.proc != nil {
				c.proc.close()
			}
			c.proc = h
		}
	}
	return info
}
