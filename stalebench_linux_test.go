package runtimeguard

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkStaleCheckWatch is a check of a checkout that moved, on the
// watch path: the 409 every request gets during an update and until a
// reload, with no receipt in the home, with one beside it (which the
// answer does not read), and with an active marker (its process asked
// about on each answer), and, in the same run, the check of an unchanged
// checkout it compares with. It reports the full reads of the checkout
// per check and logs the update state answered and the path taken.
func BenchmarkStaleCheckWatch(b *testing.B) {
	for _, tc := range []struct {
		name                    string
		moved, receipts, marker bool
	}{
		{name: "current"},
		{name: "stale-without-receipt", moved: true},
		{name: "stale-with-receipt", moved: true, receipts: true},
		{name: "stale-active-marker", moved: true, marker: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tmp := tempDir(b)
			dir, home := filepath.Join(tmp, "home", "hermes-agent"), filepath.Join(tmp, "home")
			module, _ := agentRepo(b, dir)
			g, err := newGuard(Options{ModulePath: module, HomeDir: home}, watchEnv(b))
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			want := error(nil)
			if tc.moved {
				moved := commit(b, dir, "run_agent.py", "class AIAgent: revision = 2\n")
				if tc.receipts {
					writeFile(b, filepath.Join(receiptsDir(home), "latest.json"), string(hermesReceipt(b, "gen1-300-steps-success.json", moved, time.Now())))
				}
				if tc.marker {
					writeMarker(b, filepath.Join(home, hermesMarker), os.Getpid(), time.Now())
				}
				want = ErrStale
			}
			// Let the files settle, then let the guard take the watch path.
			time.Sleep(50 * time.Millisecond)
			var last error
			for i := 0; i < 3; i++ {
				if last = g.EnsureCurrent(); !errors.Is(last, want) {
					b.Fatal(last)
				}
			}
			if !onWatchPath(g) {
				b.Fatalf("not on the watch path: %+v", g.Observe())
			}
			if se := (*StaleError)(nil); errors.As(last, &se) {
				b.Logf("update state %s", se.State)
			}
			defer reportChecks(b, g)()
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
