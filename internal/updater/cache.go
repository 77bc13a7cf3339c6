package updater

import (
	"sync"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// Cache keeps the parses of receipt files while their stamps are the
// same: a receipt is parsed once per change of its file. The zero Cache is
// empty and ready; it is safe for concurrent use.
type Cache struct {
	mu       sync.Mutex               // protects receipts
	receipts map[string]cachedReceipt // parses of receipt files, by path
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
