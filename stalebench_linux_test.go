package runtimeguard

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkStaleCheckWatch is a check of a checkout that moved, on the
// watch path: the 409 every request gets during an update and until a
// reload, with no receipt in the home and with one beside it (which the
// answer does not read), and, in the same run, the check of an unchanged
// checkout it compares with.
func BenchmarkStaleCheckWatch(b *testing.B) {
	for _, tc := range []struct {
		name            string
		moved, receipts bool
	}{
		{"current", false, false},
		{"stale-without-receipt", true, false},
		{"stale-with-receipt", true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tmp := tempDir(b)
			dir, home := filepath.Join(tmp, "agent"), filepath.Join(tmp, "home")
			module, _ := agentRepo(b, dir)
			g, err := newGuard(Options{ModulePath: module, HomeDir: home}, watchEnv(b))
			if err != nil {
				b.Fatal(err)
			}
			want := error(nil)
			if tc.moved {
				moved := commit(b, dir, "run_agent.py", "class AIAgent: revision = 2\n")
				if tc.receipts {
					writeFile(b, filepath.Join(receiptsDir(home), "latest.json"), string(hermesReceipt(b, "gen1-300-steps-success.json", moved, time.Now())))
				}
				want = ErrStale
			}
			// Let the files settle, then let the guard take the watch path.
			time.Sleep(50 * time.Millisecond)
			for i := 0; i < 3; i++ {
				if err := g.EnsureCurrent(); !errors.Is(err, want) {
					b.Fatal(err)
				}
			}
			if !onWatchPath(g) {
				b.Fatalf("not on the watch path: %+v", g.Observe())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := g.EnsureCurrent(); !errors.Is(err, want) {
					b.Fatal(err)
				}
			}
		})
	}
}
