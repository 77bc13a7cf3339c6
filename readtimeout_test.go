package runtimeguard

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
)

// hangingIndex is the system environment with a read of the index that
// blocks while hang is set, as a read on a hard NFS mount that lost its
// server does; it counts the reads blocked at once.
type hangingIndex struct {
	hang              atomic.Bool
	release           chan struct{}
	blocked, maxBlock atomic.Int32
}

func (h *hangingIndex) env() *env {
	e := testEnv(nil)
	e.git = onIndexRead(func() {
		if h.hang.Load() {
			n := h.blocked.Add(1)
			for {
				m := h.maxBlock.Load()
				if n <= m || h.maxBlock.CompareAndSwap(m, n) {
					break
				}
			}
			<-h.release
			h.blocked.Add(-1)
		}
	})
	return e
}

// onIndexRead is the system's file system calling fn before each read of
// an index, whole or opened to be read through a buffer.
func onIndexRead(fn func()) *gitread.FS {
	fsys := *gitread.System
	fsys.ReadFile = func(path string, limit int64, nofollow bool) ([]byte, fsread.Stamp, error) {
		if filepath.Base(path) == "index" {
			fn()
		}
		return fsread.ReadRegular(path, limit, nofollow)
	}
	fsys.Open = func(path string, limit int64, nofollow bool) (io.ReadCloser, fsread.Stamp, error) {
		if filepath.Base(path) == "index" {
			fn()
		}
		return gitread.System.Open(path, limit, nofollow)
	}
	return &fsys
}

// A read that never returns costs one goroutine: every check meanwhile
// fails closed within ReadTimeout, naming the timeout, and once the read
// returns the next check reads again and is current.
func TestHungReadCostsOneGoroutine(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	h := &hangingIndex{release: make(chan struct{})}
	const timeout = 300 * time.Millisecond
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir, ReadTimeout: timeout, Check: "read"}, h.env())
	require.NoError(t, err)
	require.NoError(t, g.EnsureCurrent())

	h.hang.Store(true)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := g.EnsureCurrent()
			assert.ErrorIs(t, err, ErrStale)
			assert.ErrorIs(t, err, ErrReadTimeout)
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), h.maxBlock.Load(), "reads blocked at once")

	// A read stuck for longer than the timeout fails later checks at once.
	start := time.Now()
	assert.ErrorIs(t, g.EnsureCurrent(), ErrReadTimeout)
	assert.Less(t, time.Since(start), timeout, "a check behind a read stuck past the timeout waited for it")

	h.hang.Store(false)
	close(h.release)
	// The stuck read returns; checks read again and are current (one
	// that meets the old read still winding down may fail closed).
	require.Eventually(t, func() bool { return g.EnsureCurrent() == nil }, 10*time.Second, time.Millisecond,
		"a check after the stuck read returned")
	assert.Equal(t, int32(0), h.blocked.Load())
}

// New waits no longer than ReadTimeout for a read either.
func TestNewGivesUpOnAHungRead(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	h := &hangingIndex{release: make(chan struct{})}
	defer close(h.release)
	h.hang.Store(true)
	_, err := newGuard(Options{ModulePath: module, HomeDir: dir, ReadTimeout: 100 * time.Millisecond}, h.env())
	assert.ErrorIs(t, err, ErrReadTimeout)
	assert.ErrorContains(t, err, "100ms")
}

// A panic in a read fails the check closed and keeps its value and stack.
func TestPanicInReadKeepsItsStack(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e := testEnv(nil)
	var boom atomic.Bool
	e.git = onIndexRead(func() {
		if boom.Load() {
			panic("index reader exploded")
		}
	})
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir, Check: "read"}, e)
	require.NoError(t, err)
	boom.Store(true)
	err = g.EnsureCurrent()
	require.ErrorIs(t, err, ErrStale)
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "index reader exploded", pe.Value)
	assert.True(t, strings.Contains(string(pe.Stack), "TestPanicInReadKeepsItsStack"), "the stack names the function that panicked:\n%s", pe.Stack)
	boom.Store(false)
	assert.NoError(t, g.EnsureCurrent())
}

// A read that panicked with an error unwraps to it: a host's errors.Is
// sees through the panic; any other value unwraps to nothing.
func TestPanicErrorUnwrapsAnError(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	e := testEnv(nil)
	var boom atomic.Pointer[any]
	e.git = onIndexRead(func() {
		if v := boom.Load(); v != nil {
			panic(*v)
		}
	})
	g, err := newGuard(Options{ModulePath: module, HomeDir: dir, Check: "read"}, e)
	require.NoError(t, err)
	var v any = fmt.Errorf("decoding the index: %w", io.ErrUnexpectedEOF)
	boom.Store(&v)
	err = g.EnsureCurrent()
	require.ErrorIs(t, err, ErrStale)
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the panic's error is in the chain")
	v = "not an error"
	boom.Store(&v)
	err = g.EnsureCurrent()
	require.ErrorAs(t, err, &pe)
	assert.Nil(t, errors.Unwrap(pe), "a value that is no error unwraps to nothing")
}
