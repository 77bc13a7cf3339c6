//go:build unix

package runtimeguard

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// benchCheckout is a checkout of benchFiles tracked files and benchRefs
// packed refs, made once per run, in four layouts, and a fifth where git
// makes reftable repositories:
//
//   - packed: the branch lives in packed-refs;
//   - loose: a copy whose branch ref file is written after packing;
//   - symlinked: the loose copy reached through a symbolic link
//     (current -> loose), with the module two directories below the top
//     level;
//   - linked: a linked worktree of the loose copy (git worktree add), its
//     HEAD and index in the main repository's worktrees directory;
//   - reftable: the same files and refs in a reftable repository, its
//     stack compacted into one table, then one commit on top (two tables).
type benchCheckout struct {
	root, packed, loose string
	// modules maps each layout to the module path a guard is bound to.
	modules map[string]string
}

// benchLayoutNames are the layouts, in the order benchmarks run them.
var benchLayoutNames = []string{"loose", "packed", "symlinked", "linked", "reftable"}

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
		cleanups = append(cleanups, root)
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
		worktree := filepath.Join(root, "worktree")
		git(b, benchRepo.loose, "worktree", "add", "-q", "-b", "worktree", worktree)
		benchRepo.modules = map[string]string{
			"packed":    filepath.Join(benchRepo.packed, "run_agent.py"),
			"loose":     filepath.Join(benchRepo.loose, "run_agent.py"),
			"symlinked": filepath.Join(root, "current", "src", "pkg000", "module_00000.py"),
			"linked":    filepath.Join(worktree, "run_agent.py"),
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
// to there, and logs what the figures depend on: the layout, the files
// and refs, the git that made them.
func benchLayouts(b *testing.B, fn func(b *testing.B, module string)) {
	repo := benchSetup(b)
	for _, layout := range benchLayoutNames {
		if module, ok := repo.modules[layout]; ok {
			b.Run(layout, func(b *testing.B) {
				b.Logf("%s layout, module %s: %d tracked files, %d packed refs, made by %s", layout, module, benchFiles+1, benchRefs, gittest.Describe())
				fn(b, module)
			})
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
	for _, d := range g.bound.Load().snap.Load().Deps {
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

// benchChecks times b.N checks of g, which must all pass, and reports
// the path they took and the full reads among them.
func benchChecks(b *testing.B, g *Guard) {
	defer reportChecks(b, g)()
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
	defer reportChecks(b, g)()
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

// reportChecks returns what reports, once b's loop ran, the full reads per
// check of g (the metric fullreads/op) and the path its checks take.
func reportChecks(b *testing.B, g *Guard) func() {
	before := g.Stats().FullReads
	return func() {
		b.StopTimer()
		b.ReportMetric(float64(g.Stats().FullReads-before)/float64(b.N), "fullreads/op")
		o := g.Observe()
		b.Logf("GOMAXPROCS %d; checks take the %s path%s", runtime.GOMAXPROCS(0), o.Check, map[bool]string{true: " (" + o.CheckReason + ")"}[o.CheckReason != ""])
	}
}

// BenchmarkStatFloor is one stat (or lstat) by path of each file the
// answer depends on, the list a bound guard keeps (logged by
// BenchmarkEnsureCurrent): HEAD, commondir (absent), the Git directory's
// objects and refs, the config, the index, the branch's loose ref (absent
// when packed), packed-refs when the branch lives there, for the
// symlinked layout the link and the directories between the top level
// and the module, for the linked worktree its .git file, gitdir and the
// common directory's files; and for objects and refs, only the access(2)
// call git makes of them (no stat: git asks nothing else). It is the
// floor of a check that stats each file by its path, as the stat path
// does: the kernel walks every path from the root. (Stats relative to a
// directory descriptor held open would walk less, but a held descriptor
// keeps answering for a directory renamed away.)
func BenchmarkStatFloor(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		deps := settledGuard(b, module).bound.Load().snap.Load().Deps
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
				switch {
				case access[j]:
					_ = unix.Access(p, unix.X_OK)
				case lstat[j]:
					_ = unix.Lstat(p, &st)
				default:
					_ = unix.Stat(p, &st)
				}
			}
		}
		b.ReportMetric(float64(len(deps)), "files")
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

// BenchmarkFullRead is the guard's check after a change, on the watch
// path and on the stat path: before each check (untimed), HEAD is
// written again with the same content and renamed over, as git writes it,
// so the revision stays; the check finds the change (an inotify event,
// or HEAD's stamp), reads HEAD, the refs, the config and the whole index
// on the goroutine of the binding's reads, arms its watches again on the
// watch path, and hands the answer back. The clock runs an hour ahead, so
// that one read settles (fullreads/op 1). BenchmarkReadRevision is the
// reader alone.
func BenchmarkFullRead(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		head := filepath.Join(git(b, filepath.Dir(module), "rev-parse", "--absolute-git-dir"), "HEAD")
		content, err := os.ReadFile(head)
		if err != nil {
			b.Fatal(err)
		}
		for _, path := range []string{"watch", "stat"} {
			b.Run(path, func(b *testing.B) {
				e := settledEnv()
				if path == "watch" {
					e = watchEnv(b)
					e.now = settledEnv().now
				}
				g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(b)}, e)
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				for i := 0; i < 3; i++ {
					if err := g.EnsureCurrent(); err != nil {
						b.Fatal(err)
					}
				}
				if o := g.Observe(); o.Check != path {
					b.Fatalf("checks take the %s path (%s), not %s", o.Check, o.CheckReason, path)
				}
				lock := head + ".lock"
				b.ReportAllocs()
				before := g.Stats().FullReads
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					if err := os.WriteFile(lock, content, 0o644); err != nil {
						b.Fatal(err)
					}
					if err := os.Rename(lock, head); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if err := g.EnsureCurrent(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(g.Stats().FullReads-before)/float64(b.N), "fullreads/op")
			})
		}
	})
}

// BenchmarkReadRevision is the reader alone, as BenchmarkFullRead's
// check calls it: HEAD, the refs, the config and the whole index, read
// and parsed, with no guard around it (no goroutine, no watch).
func BenchmarkReadRevision(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if rev, err := inspectRevision(module); err != nil || rev == "" {
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

// BenchmarkBind100k binds a guard to a checkout of 100,000 tracked files
// (and closes it): the settled read New makes once at startup, which
// reads the index whole, stats every file it depended on again, and on
// the watch path arms the inotify watches. BenchmarkBindGitCLI100k is the
// same answer from git.
func BenchmarkBind100k(b *testing.B) {
	dir := bigSetup(b)
	module := filepath.Join(dir, "run_agent.py")
	b.Logf("100,001 tracked files, 10 packed refs, made by %s", gittest.Describe())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g, err := New(Options{ModulePath: module, HomeDir: dir})
		if err != nil || g.Identity().Revision == "" {
			b.Fatal(err)
		}
		if i == 0 {
			o := g.Observe()
			b.Logf("checks take the %s path", o.Check)
		}
		g.Close()
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
		g.Close()
	}
}

// BenchmarkBindGitCLI100k is the same answer from git: ls-files
// --error-unmatch and rev-parse on the same checkout.
func BenchmarkBindGitCLI100k(b *testing.B) {
	dir := bigSetup(b)
	b.Logf("%s", gittest.Describe())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runGitCommands(b, dir,
			[]string{"--literal-pathspecs", "ls-files", "--error-unmatch", "--", "run_agent.py"},
			[]string{"rev-parse", "--verify", "HEAD"})
	}
}

// runGitCommands runs each git command line in dir, as the reference
// implementation does (plain processes), in the tests' isolated git
// environment: no global or system configuration.
func runGitCommands(b *testing.B, dir string, commands ...[]string) {
	for _, args := range commands {
		cmd := gittest.Command(dir, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
}
