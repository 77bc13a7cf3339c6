//go:build unix

package gogitcompare

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	gogit "github.com/go-git/go-git/v5"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// The checkout of the root module's benchmarks: an index of benchFiles
// tracked files plus run_agent.py, and benchRefs tags in packed-refs.
const (
	benchFiles = 20000
	benchRefs  = 5000
)

var (
	benchOnce    sync.Once
	benchModules map[string]string
	benchErr     error
)

// benchSetup makes the checkout once per run in three layouts: packed (the
// branch in packed-refs), loose (a copy whose branch ref file is written
// after packing) and symlinked (the loose copy reached through a symbolic
// link, the module two directories below the top level).
func benchSetup(b *testing.B) map[string]string {
	b.Helper()
	gittest.Need(b)
	benchOnce.Do(func() {
		root, err := os.MkdirTemp("", "gogitcompare-bench-")
		if err != nil {
			benchErr = err
			return
		}
		for _, layout := range []string{"packed", "loose"} {
			dir := filepath.Join(root, layout)
			if err := makeCheckout(dir); err != nil {
				benchErr = err
				return
			}
		}
		loose := filepath.Join(root, "loose")
		head, err := gittest.Command(loose, "rev-parse", "HEAD").Output()
		if err != nil {
			benchErr = err
			return
		}
		if err := os.WriteFile(filepath.Join(loose, ".git", "refs", "heads", "main"), head, 0o644); err != nil {
			benchErr = err
			return
		}
		nested := filepath.Join(loose, "src", "pkg000", "module_00000.py")
		if err := os.MkdirAll(filepath.Dir(nested), 0o755); err != nil {
			benchErr = err
			return
		}
		if err := os.WriteFile(nested, []byte("class AIAgent: pass\n"), 0o644); err != nil {
			benchErr = err
			return
		}
		if err := os.Symlink("loose", filepath.Join(root, "current")); err != nil {
			benchErr = err
			return
		}
		benchModules = map[string]string{
			"packed":    filepath.Join(root, "packed", "run_agent.py"),
			"loose":     filepath.Join(loose, "run_agent.py"),
			"symlinked": filepath.Join(root, "current", "src", "pkg000", "module_00000.py"),
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchModules
}

// makeCheckout builds the repository in dir, every index entry naming one
// blob so that no file but run_agent.py has to be written.
func makeCheckout(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "run_agent.py"), []byte("class AIAgent: pass\n"), 0o644); err != nil {
		return err
	}
	run := func(stdin *bytes.Buffer, args ...string) (string, error) {
		cmd := gittest.Command(dir, args...)
		if stdin != nil {
			cmd.Stdin = stdin
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := run(nil, "init", "-q"); err != nil {
		return err
	}
	blob, err := run(nil, "hash-object", "-w", "run_agent.py")
	if err != nil {
		return err
	}
	var in bytes.Buffer
	for i := 0; i < benchFiles; i++ {
		fmt.Fprintf(&in, "100644 %s 0\tsrc/pkg%03d/module_%05d.py\n", blob, i%500, i)
	}
	fmt.Fprintf(&in, "100644 %s 0\trun_agent.py\n", blob)
	if _, err := run(&in, "update-index", "--index-info"); err != nil {
		return err
	}
	if _, err := run(nil, "commit", "-q", "-m", "many files"); err != nil {
		return err
	}
	head, err := run(nil, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	in.Reset()
	for i := 0; i < benchRefs; i++ {
		fmt.Fprintf(&in, "create refs/tags/t%05d %s\n", i, head)
	}
	if _, err := run(&in, "update-ref", "--stdin"); err != nil {
		return err
	}
	_, err = run(nil, "pack-refs", "--all")
	return err
}

// benchLayouts runs fn for each layout with the module path a guard binds
// to there.
func benchLayouts(b *testing.B, fn func(b *testing.B, module string)) {
	modules := benchSetup(b)
	for _, layout := range []string{"loose", "packed", "symlinked"} {
		b.Run(layout, func(b *testing.B) { fn(b, modules[layout]) })
	}
}

// BenchmarkGoGitOpenHead opens the repository with go-git and reads HEAD per
// check, without proving the module is tracked.
func BenchmarkGoGitOpenHead(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			repo, err := gogit.PlainOpenWithOptions(filepath.Dir(module), &gogit.PlainOpenOptions{DetectDotGit: true})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := repo.Head(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFullRead is the guard's own read on the same checkouts, as the
// root module's benchmark of that name: HEAD, the refs and the whole index,
// proving the module is tracked.
func BenchmarkFullRead(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if rev, err := inspectRevision(module); err != nil || rev == "" {
				b.Fatal(rev, err)
			}
		}
	})
}
