package updater

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// receiptDir is a home's receipts directory with its sources.
type receiptDir struct {
	dir     string
	sources []ReceiptSource
}

func newReceiptDir(t *testing.T) *receiptDir {
	dir := filepath.Join(tempDir(t), "logs", "update_receipts")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return &receiptDir{dir, []ReceiptSource{{Latest: filepath.Join(dir, "latest.json"), History: filepath.Join(dir, ReceiptHistoryPattern)}}}
}

func (d *receiptDir) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(d.dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

const (
	headSHA  = "3333333333333333333333333333333333333333"
	otherSHA = "4444444444444444444444444444444444444444"
)

// The receipt that counts is the newest written since the listing before:
// latest.json or a retained one, whichever finished last.
func TestNewestReceipt(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	e := testEnv()

	t.Run("a lost latest.json", func(t *testing.T) {
		d := newReceiptDir(t)
		d.write(t, "latest.json", gittest.HermesReceipt(t, "gen1-update-id-success.json", otherSHA, t0))
		before := ListReceipts(d.sources)
		p := d.write(t, "update_20261201_081340_12054.json", gittest.HermesReceipt(t, "gen2-no-id-success.json", headSHA, t0.Add(time.Minute)))
		r, why := e.NewestReceipt(ListReceipts(d.sources), &before, "")
		require.Empty(t, why)
		require.NotNil(t, r)
		assert.Equal(t, p, r.Path)
		assert.Equal(t, headSHA, r.To)
		assert.Contains(t, r.ID, "sha256:", "a receipt without ids is named by its bytes")
	})
	t.Run("a newer retained failure beats latest.json", func(t *testing.T) {
		d := newReceiptDir(t)
		before := ListReceipts(d.sources)
		d.write(t, "latest.json", gittest.HermesReceipt(t, "gen3-correlation-success-latest.json", headSHA, t0.Add(time.Minute)))
		p := d.write(t, "update_20261201_081341_1_x.json", gittest.HermesReceipt(t, "gen1-update-id-failed.json", headSHA, t0.Add(2*time.Minute)))
		r, why := e.NewestReceipt(ListReceipts(d.sources), &before, "")
		require.Empty(t, why)
		assert.Equal(t, p, r.Path)
		assert.Equal(t, OutcomeFailed, r.Outcome)
	})
	t.Run("nothing written since", func(t *testing.T) {
		d := newReceiptDir(t)
		d.write(t, "latest.json", gittest.HermesReceipt(t, "gen1-update-id-success.json", headSHA, t0))
		d.write(t, "update_1.json", gittest.HermesReceipt(t, "gen1-update-id-success.json", headSHA, t0))
		before := ListReceipts(d.sources)
		r, why := e.NewestReceipt(ListReceipts(d.sources), &before, "")
		assert.Nil(t, r)
		assert.Empty(t, why)
		// Without a listing before, every file counts.
		r, why = e.NewestReceipt(ListReceipts(d.sources), nil, "")
		require.Empty(t, why)
		assert.Equal(t, OutcomeSuccess, r.Outcome)
	})
	t.Run("equally new and disagreeing", func(t *testing.T) {
		d := newReceiptDir(t)
		before := ListReceipts(d.sources)
		d.write(t, "latest.json", gittest.HermesReceipt(t, "gen1-update-id-success.json", headSHA, t0))
		d.write(t, "update_2.json", gittest.HermesReceipt(t, "gen1-update-id-failed.json", headSHA, t0))
		r, why := e.NewestReceipt(ListReceipts(d.sources), &before, "")
		assert.Nil(t, r)
		assert.Contains(t, why, "disagree")
	})
	t.Run("a byte-equal copy agrees", func(t *testing.T) {
		d := newReceiptDir(t)
		before := ListReceipts(d.sources)
		data := gittest.HermesReceipt(t, "gen1-300-steps-success.json", headSHA, t0)
		require.Greater(t, len(data), 64<<10, "the long receipt is over the old cap")
		d.write(t, "update_3_cbb7.json", data)
		latest := d.write(t, "latest.json", data)
		r, why := e.NewestReceipt(ListReceipts(d.sources), &before, "")
		require.Empty(t, why)
		assert.Equal(t, latest, r.Path, "of equal receipts, the first by path")
		assert.Equal(t, headSHA, r.To)
	})
	t.Run("too many receipts", func(t *testing.T) {
		d := newReceiptDir(t)
		for i := 0; i <= MaxReceiptFiles; i++ {
			d.write(t, fmt.Sprintf("update_%04d.json", i), []byte("{}"))
		}
		_, why := e.NewestReceipt(ListReceipts(d.sources), nil, "")
		assert.Contains(t, why, "more than")
	})
}

// latest.json written in place (Hermes's second generation) can be met
// half written: that read proves nothing and leaves nothing behind, so the
// same receipt, once whole, is read.
func TestNewestReceiptHalfWritten(t *testing.T) {
	d := newReceiptDir(t)
	e := testEnv()
	e.Cache = new(Cache)
	before := ListReceipts(d.sources)
	whole := gittest.HermesReceipt(t, "gen2-no-id-success.json", headSHA, time.Now().Add(-time.Minute))
	latest := filepath.Join(d.dir, "latest.json")
	f, err := os.OpenFile(latest, os.O_WRONLY|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(whole[:len(whole)/2])
	require.NoError(t, err)
	r, why := e.NewestReceipt(ListReceipts(d.sources), &before, "")
	assert.Nil(t, r)
	assert.Contains(t, why, "not usable")

	_, err = f.Write(whole[len(whole)/2:])
	require.NoError(t, err)
	r, why = e.NewestReceipt(ListReceipts(d.sources), &before, "")
	require.Empty(t, why)
	assert.Equal(t, headSHA, r.To)
}

// A parse is made once per change of the file: an unchanged receipt is
// answered from the cache, a rewritten one read again.
func TestReceiptParsedOncePerChange(t *testing.T) {
	d := newReceiptDir(t)
	var opens int
	e := testEnv()
	e.Cache = new(Cache)
	e.Open = func(path string, limit int64) ([]byte, FileKind, string) {
		opens++
		return SafeOpen(path, limit)
	}
	// The clock a second ahead: the files written here are old enough for
	// their stamps to tell a rewrite (Git's racy rule).
	e.Now = func() time.Time { return time.Now().Add(time.Second) }
	d.write(t, "latest.json", gittest.HermesReceipt(t, "gen1-300-steps-success.json", headSHA, time.Now().Add(-time.Hour)))
	for i := 0; i < 5; i++ {
		r, why := e.NewestReceipt(ListReceipts(d.sources), nil, "")
		require.Empty(t, why)
		require.NotNil(t, r)
	}
	assert.Equal(t, 1, opens, "five looks at an unchanged receipt")
	d.write(t, "latest.json", gittest.HermesReceipt(t, "gen1-update-id-failed.json", headSHA, time.Now().Add(-time.Minute)))
	r, _ := e.NewestReceipt(ListReceipts(d.sources), nil, "")
	assert.Equal(t, OutcomeFailed, r.Outcome)
	assert.Equal(t, 2, opens)
}
