package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// liveWDs lists the watch descriptors the kernel holds on the inotify fd.
func liveWDs(t *testing.T, fd int) map[int32]bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	require.NoError(t, err)
	m := map[int32]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "inotify" {
			v, err := strconv.ParseInt(strings.TrimPrefix(f[1], "wd:"), 16, 32)
			require.NoError(t, err)
			m[int32(v)] = true
		}
	}
	return m
}

// A subscription armed while others on the same directory arm and close
// counts only on watches the kernel still has, and a write after it armed
// makes it dirty: a watch another subscription removed in between is never
// one it registers. (Before arming took the lock removals take, 1 in 40
// rounds registered a dead watch and missed the write.)
func TestArmWhileOthersClose(t *testing.T) {
	w, err := Shared()
	if err != nil {
		t.Skipf("no watch path here: %v", err)
	}
	root := t.TempDir()
	file := filepath.Join(root, "x", "f")
	require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
	require.NoError(t, os.WriteFile(file, []byte("a"), 0o644))
	probe := w.Subscribe()
	_, err = probe.Arm([]Entry{{Path: file, File: true}})
	probe.Close() // a subscription left open would keep the watches alive
	if err != nil {
		t.Skipf("no watch path for %s: %v", root, err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	churn := func(path string) {
		defer wg.Done()
		for !stop.Load() {
			s := w.Subscribe()
			s.Clear()
			_, _ = s.Arm([]Entry{{Path: path, File: true}})
			s.Close()
		}
	}
	for i := 0; i < 2; i++ {
		other := filepath.Join(root, fmt.Sprint("n", i), "f")
		require.NoError(t, os.MkdirAll(filepath.Dir(other), 0o755))
		require.NoError(t, os.WriteFile(other, nil, 0o644))
		wg.Add(2)
		go churn(file)
		go churn(other)
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()

	rounds := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); rounds++ {
		s := w.Subscribe()
		gen := s.Clear()
		_, err := s.Arm([]Entry{{Path: file, File: true}})
		require.NoError(t, err)
		w.mu.Lock()
		var wds []int32
		for _, r := range s.regs {
			wds = append(wds, r.d.wd)
		}
		w.mu.Unlock()
		live := liveWDs(t, w.fd)
		for _, wd := range wds {
			require.True(t, wd < 0 || live[wd], "round %d: registered wd %d, which the kernel no longer has", rounds, wd)
		}
		if s.Settle(gen) {
			require.NoError(t, os.WriteFile(file, []byte(fmt.Sprint(rounds)), 0o644))
			require.False(t, s.Settle(gen) || s.Unchanged(gen), "round %d: written after arming, and still clean", rounds)
		}
		s.Close()
	}
	t.Logf("%d rounds", rounds)
}
