//go:build unix

package runtimeguard

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// benchCheckout is a checkout of benchFiles tracked files and benchRefs
// packed refs, made once per run, in three layouts, and a fourth where git
// makes reftable repositories:
//
//   - packed: the branch lives in packed-refs;
//   - loose: a copy whose branch ref file is written after packing;
//   - linked: the loose copy reached through a link (current -> loose),
//     with the module two directories below the top level;
//   - reftable: the same files and refs in a reftable repository, its
//     stack compacted into one table, then one commit on top (two tables).
type benchCheckout struct {
	root, packed, loose string
	// modules maps each layout to the module path a guard is bound to.
	modules map[string]string
}

const (
	benchFiles = 20000
	benchRefs  = 5000
)

var (
	benchOnce sync.Once
	benchRepo benchCheckout
	benchErr  error
)

// makeCheckout builds a repository whose index tracks files entries (all
// naming one blob, so no file has to be written) plus run_agent.py, with
// refs tags packed into packed-refs (or compacted into one table).
// initArgs go to git init.
func makeCheckout(tb testing.TB, dir string, files, refs int, initArgs ...string) {
	tb.Helper()
	module := filepath.Join(dir, "run_agent.py")
	writeFile(tb, module, "class AIAgent: pass\n")
	git(tb, dir, append([]string{"init", "-q"}, initArgs...)...)
	blob := git(tb, dir, "hash-object", "-w", "run_agent.py")
	var in bytes.Buffer
	for i := 0; i < files; i++ {
		fmt.Fprintf(&in, "100644 %s 0\tsrc/pkg%03d/module_%05d.py\n", blob, i%500, i)
	}
	fmt.Fprintf(&in, "100644 %s 0\trun_agent.py\n", blob)
	runGitStdin(tb, dir, &in, "update-index", "--index-info")
	git(tb, dir, "commit", "-q", "-m", "many files")
	head := git(tb, dir, "rev-parse", "HEAD")
	in.Reset()
	for i := 0; i < refs; i++ {
		fmt.Fprintf(&in, "create refs/tags/t%05d %s\n", i, head)
	}
	runGitStdin(tb, dir, &in, "update-ref", "--stdin")
	git(tb, dir, "pack-refs", "--all")
}

func runGitStdin(tb testing.TB, dir string, stdin *bytes.Buffer, args ...string) {
	tb.Helper()
	cmd := gittest.Command(dir, args...)
	cmd.Stdin = stdin
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func benchSetup(b *testing.B) benchCheckout {
	b.Helper()
	benchOnce.Do(func() {
		root, err := os.MkdirTemp("", "runtimeguard-bench-")
		if err != nil {
			benchErr = err
			return
		}
		benchRepo = benchCheckout{root: root, packed: filepath.Join(root, "packed"), loose: filepath.Join(root, "loose")}
		makeCheckout(b, benchRepo.packed, benchFiles, benchRefs)
		if out, err := exec.Command("cp", "-a", benchRepo.packed, benchRepo.loose).CombinedOutput(); err != nil {
			benchErr = fmt.Errorf("cp: %v: %s", err, out)
			return
		}
		// git update-ref does not write a ref whose value is unchanged:
		// write the loose ref file itself, as git does, over the packed one.
		head := git(b, benchRepo.loose, "rev-parse", "HEAD")
		writeFile(b, filepath.Join(benchRepo.loose, ".git", "refs", "heads", "main"), head+"\n")
		nested := filepath.Join(benchRepo.loose, "src", "pkg000", "module_00000.py")
		writeFile(b, nested, "class AIAgent: pass\n")
		if err := os.Symlink("loose", filepath.Join(root, "current")); err != nil {
			benchErr = err
			return
		}
		benchRepo.modules = map[string]string{
			"packed": filepath.Join(benchRepo.packed, "run_agent.py"),
			"loose":  filepath.Join(benchRepo.loose, "run_agent.py"),
			"linked": filepath.Join(root, "current", "src", "pkg000", "module_00000.py"),
		}
		if gittest.HasReftable() {
			dir := filepath.Join(root, "reftable")
			makeCheckout(b, dir, benchFiles, benchRefs, "--ref-format=reftable")
			git(b, dir, "commit", "-q", "--allow-empty", "-m", "on top")
			benchRepo.modules["reftable"] = filepath.Join(dir, "run_agent.py")
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchRepo
}

// benchLayouts runs fn for each layout with the module path a guard binds
// to there.
func benchLayouts(b *testing.B, fn func(b *testing.B, module string)) {
	repo := benchSetup(b)
	for _, layout := range []string{"loose", "packed", "linked", "reftable"} {
		if module, ok := repo.modules[layout]; ok {
			b.Run(layout, func(b *testing.B) { fn(b, module) })
		}
	}
}

// settledGuard binds to module and proves its snapshot is trusted: the
// bench checkout was just written, so its clock runs an hour ahead. It
// logs the files the answer depends on: what a check stats.
func settledGuard(b *testing.B, module string) *Guard {
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(b)}, settledEnv())
	if err != nil {
		b.Fatal(err)
	}
	if err := g.EnsureCurrent(); err != nil {
		b.Fatal(err)
	}
	if !trusted(g) {
		b.Fatal("snapshot not trusted")
	}
	return g
}

// depList describes a guard's dependencies, one per line.
func depList(g *Guard) string {
	var sb strings.Builder
	for _, d := range g.bound.Load().snap.Load().deps {
		op := "stat "
		if d.NoFollow {
			op = "lstat"
		}
		state := "present"
		if !d.Stamp.Present() {
			state = "absent"
		}
		fmt.Fprintf(&sb, "\n  %s %s (%s)", op, d.Path, state)
	}
	return sb.String()
}

// BenchmarkEnsureCurrent is a check of an unchanged checkout.
func BenchmarkEnsureCurrent(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		g := settledGuard(b, module)
		b.Logf("a check stats:%s", depList(g))
		benchChecks(b, g)
	})
}

// BenchmarkEnsureCurrentParallel is the same from GOMAXPROCS goroutines.
func BenchmarkEnsureCurrentParallel(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		benchChecksParallel(b, settledGuard(b, module))
	})
}

// benchChecks times b.N checks of g, which must all pass.
func benchChecks(b *testing.B, g *Guard) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := g.EnsureCurrent(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchChecksParallel is benchChecks from GOMAXPROCS goroutines.
func benchChecksParallel(b *testing.B, g *Guard) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.EnsureCurrent(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkStatFloor is one stat (or lstat) of each file the answer depends
// on, the list a bound guard keeps (logged by BenchmarkEnsureCurrent):
// HEAD, commondir (absent), the Git directory's objects and refs, the
// config, the index, the branch's loose ref (absent when packed),
// packed-refs when the branch lives there, and for the linked layout the
// link and the directories between the top level and the module; and for
// objects and refs, the access(2) call git makes of them. No correct check
// by stat can pay less.
func BenchmarkStatFloor(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		deps := settledGuard(b, module).bound.Load().snap.Load().deps
		paths := make([]string, len(deps))
		lstat := make([]bool, len(deps))
		access := make([]bool, len(deps))
		for i, d := range deps {
			paths[i], lstat[i], access[i] = d.Path, d.NoFollow, d.Identity
		}
		b.ReportAllocs()
		b.ResetTimer()
		var st unix.Stat_t
		for i := 0; i < b.N; i++ {
			for j, p := range paths {
				if lstat[j] {
					_ = unix.Lstat(p, &st)
				} else {
					_ = unix.Stat(p, &st)
				}
				if access[j] {
					_ = unix.Access(p, unix.X_OK)
				}
			}
		}
	})
}

// BenchmarkReferenceGitCLI is what the reference implementation does per
// check: three git processes.
func BenchmarkReferenceGitCLI(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		dir := filepath.Dir(module)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			runGitCommands(b, dir,
				[]string{"rev-parse", "--show-toplevel"},
				[]string{"--literal-pathspecs", "ls-files", "--error-unmatch", "--", filepath.Base(module)},
				[]string{"rev-parse", "--verify", "HEAD"})
		}
	})
}

// BenchmarkFullRead is a check that has to read again: HEAD, the refs and
// the whole index, as after every change.
func BenchmarkFullRead(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if rev, err := gitread.ReadRevision(filepath.Dir(module), module); err != nil || rev == "" {
				b.Fatal(rev, err)
			}
		}
	})
}

var (
	bigOnce sync.Once
	bigDir  string
)

// bigSetup makes a checkout of 100,000 tracked files, once per run.
func bigSetup(b *testing.B) string {
	b.Helper()
	bigOnce.Do(func() {
		root := benchSetup(b).root
		bigDir = filepath.Join(root, "big")
		makeCheckout(b, bigDir, 100000, 10)
	})
	return bigDir
}

// BenchmarkBind100k binds a guard to a checkout of 100,000 tracked files:
// the full read a server pays once at startup and after every change.
func BenchmarkBind100k(b *testing.B) {
	dir := bigSetup(b)
	module := filepath.Join(dir, "run_agent.py")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g, err := New(Options{ModulePath: module, HomeDir: dir})
		if err != nil || g.Identity().Revision == "" {
			b.Fatal(err)
		}
	}
}

// BenchmarkBind100kReftable is BenchmarkBind100k on a reftable
// repository of the same files (its stack: one table of ten refs).
func BenchmarkBind100kReftable(b *testing.B) {
	if !gittest.HasReftable() {
		b.Skip("the git on PATH makes no reftable repository (before 2.45)")
	}
	dir := filepath.Join(benchSetup(b).root, "big-reftable")
	if _, err := os.Stat(dir); err != nil {
		makeCheckout(b, dir, 100000, 10, "--ref-format=reftable")
	}
	module := filepath.Join(dir, "run_agent.py")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g, err := New(Options{ModulePath: module, HomeDir: dir})
		if err != nil || g.Identity().Revision == "" {
			b.Fatal(err)
		}
	}
}

// BenchmarkBindGitCLI100k is the same answer from git: ls-files
// --error-unmatch and rev-parse on the same checkout.
func BenchmarkBindGitCLI100k(b *testing.B) {
	dir := bigSetup(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runGitCommands(b, dir,
			[]string{"--literal-pathspecs", "ls-files", "--error-unmatch", "--", "run_agent.py"},
			[]string{"rev-parse", "--verify", "HEAD"})
	}
}

// runGitCommands runs each git command line in dir, as the reference
// implementation does: plain processes (in the harness's environment, so
// that the user's Git configuration costs nothing here either).
func runGitCommands(b *testing.B, dir string, commands ...[]string) {
	for _, args := range commands {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, gittest.Env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
}
