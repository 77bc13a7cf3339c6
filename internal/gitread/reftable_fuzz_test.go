package gitread

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// gitHeadWithin is git rev-parse HEAD in dir, giving up (ok false) after
// ten seconds: git loops forever on some damaged indexes.
func gitHeadWithin(tb testing.TB, dir string) (rev string, ok bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--verify", "-q", "HEAD")
	cmd.Dir, cmd.Env = dir, gittest.Env
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err == nil
}

// gitHasNoRefs reports whether git reads the repository in dir and finds
// no ref in it: then, and only then, an unborn HEAD is settled.
func gitHasNoRefs(tb testing.TB, dir string) bool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "for-each-ref", "--count=1")
	cmd.Dir, cmd.Env = dir, gittest.Env
	out, err := cmd.Output()
	return err == nil && len(out) == 0
}

// checkAgainstGit fails the fuzz run where the reader's answer for module
// is not git's: a revision git does not give, an inert answer (no revision,
// settled) where git has refs to read, or, when strict (a repository git
// made), a failure where git reads HEAD.
func checkAgainstGit(t *testing.T, module string, strict bool) {
	t.Helper()
	abs, err := Abs(module)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := Read(System, abs, true)
	want, gitOK := gitHeadWithin(t, filepath.Dir(module))
	switch {
	case err == nil && c.Revision != "":
		if !gitOK || want != c.Revision {
			t.Fatalf("%s: the reader says %s, git rev-parse HEAD says %q (ok %v)", module, c.Revision, want, gitOK)
		}
	case err == nil && !c.Transient:
		if gitOK || !gitHasNoRefs(t, filepath.Dir(module)) {
			t.Fatalf("%s: the reader finds no revision and nothing transient (%s), git rev-parse HEAD says %q (ok %v)", module, c.Reason, want, gitOK)
		}
	case err != nil && strict && gitOK:
		t.Fatalf("%s: the reader fails (%v), git reads HEAD %s", module, err, want)
	case err == nil && strict && gitOK:
		t.Fatalf("%s: the reader finds HEAD transient (%s), git reads %s", module, c.Reason, want)
	}
}

// FuzzReftableDamaged: whatever is done to the bytes of a table of a real
// stack (bytes flipped, the table cut short or extended), the reader never
// panics, never gives a revision git does not give, and never guards
// nothing where git has refs. The input is the damage, not the table, so
// that what the fuzzer finds minimizes quickly: flips are three bytes
// each, an offset (big-endian, modulo the table's length) and the bits to
// flip there; cut removes that many bytes from the end (modulo the
// length); extend is appended.
func FuzzReftableDamaged(f *testing.F) {
	type repo struct {
		module string
		tables []string
		orig   [][]byte
	}
	var repos []repo
	if gittest.HasReftable() {
		for _, format := range []string{"sha1", "sha256"} {
			dir := filepath.Join(tempDir(f), format)
			initRepo(f, dir, map[string]string{"run_agent.py": "x = 1\n"}, "--ref-format=reftable", "--object-format="+format)
			if format == "sha1" {
				// Small blocks: an index of index blocks.
				gittest.Git(f, dir, "config", "reftable.blockSize", "300")
			}
			manyRefs(f, dir, "many", 400) // a table with an index
			gittest.Git(f, dir, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
			gittest.Git(f, dir, "symbolic-ref", "HEAD", "refs/heads/alias")
			gittest.Git(f, dir, "branch", "-f", "many/00100", "HEAD")
			rt := filepath.Join(dir, ".git", "reftable")
			r := repo{module: filepath.Join(dir, "run_agent.py"), tables: tablePaths(f, rt)}
			for _, p := range r.tables {
				data, err := os.ReadFile(p)
				if err != nil {
					f.Fatal(err)
				}
				if err := os.Chmod(p, 0o644); err != nil {
					f.Fatal(err)
				}
				r.orig = append(r.orig, data)
			}
			repos = append(repos, r)
		}
	}
	f.Add(false, uint8(0), []byte{}, uint16(0), []byte{})
	f.Add(true, uint8(1), []byte{0xff, 0xff, 0x01}, uint16(0), []byte{})
	f.Add(false, uint8(1), []byte{0x00, 0x30, 0x80, 0x01, 0x00, 0x04}, uint16(0), []byte{})
	f.Add(false, uint8(0), []byte{}, uint16(100), []byte{})
	f.Add(true, uint8(0), []byte{}, uint16(0), []byte("REFT\x01"))
	f.Fuzz(func(t *testing.T, sha256 bool, which uint8, flips []byte, cut uint16, extend []byte) {
		if len(repos) == 0 {
			t.Skip("the git on PATH makes no reftable repository (before 2.45)")
		}
		r := repos[0]
		if sha256 {
			r = repos[1]
		}
		i := int(which) % len(r.tables)
		data := append([]byte(nil), r.orig[i]...)
		intact := len(flips) < 3 && int(cut)%len(data) == 0 && len(extend) == 0
		for ; len(flips) >= 3; flips = flips[3:] {
			data[(int(flips[0])<<8|int(flips[1]))%len(data)] ^= flips[2]
		}
		if cut > 0 {
			data = data[:len(data)-int(cut)%len(data)]
		}
		data = append(data, extend...)
		if err := os.WriteFile(r.tables[i], data, 0o644); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.WriteFile(r.tables[i], r.orig[i], 0o644); err != nil {
				t.Fatal(err)
			}
		}()
		checkAgainstGit(t, r.module, intact)
	})
}

// FuzzReftableAgainstGit: a reftable repository built by random ref
// operations (commit, branch, rename, delete, symbolic-ref, pack-refs, gc,
// worktree add, checkout, detach, many refs at once) reads, in the main
// and in a linked worktree, as git rev-parse HEAD reads it after each.
func FuzzReftableAgainstGit(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{7, 0, 12, 2, 9, 5})
	f.Add([]byte{1, 4, 17, 5, 3, 10})
	f.Add([]byte{9, 5, 0, 8, 7, 20, 6})
	f.Add([]byte{7, 11, 18, 2, 19, 4})
	var tmpl, first string
	if gittest.HasReftable() {
		tmpl = filepath.Join(tempDir(f), "tmpl")
		first = initRepo(f, tmpl, map[string]string{"run_agent.py": "x = 1\n"}, "--ref-format=reftable")
		// No automatic maintenance detached in the background (current
		// gits start one after a commit): it would race the copies.
		gittest.Git(f, tmpl, "config", "maintenance.auto", "false")
		gittest.Git(f, tmpl, "config", "gc.auto", "0")
		commit(f, tmpl, "run_agent.py", "x = 2\n")
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if tmpl == "" {
			t.Skip("the git on PATH makes no reftable repository (before 2.45)")
		}
		if len(ops) > 8 {
			ops = ops[:8]
		}
		dir := filepath.Join(t.TempDir(), "repo")
		// The template's first commit may have started a maintenance run
		// that is still taking and dropping its lock: copy again then.
		for try := 0; ; try++ {
			out, err := exec.Command("cp", "-a", tmpl, dir).CombinedOutput()
			if err == nil {
				break
			}
			if try == 5 {
				t.Fatalf("cp: %v: %s", err, out)
			}
			_ = os.RemoveAll(dir)
			time.Sleep(100 * time.Millisecond)
		}
		wt := filepath.Join(filepath.Dir(dir), "wt")
		hasWT := false
		run := func(in string, args ...string) {
			_ = gittest.Command(in, args...).Run() // an operation git refuses changes nothing
		}
		for n, op := range ops {
			in := dir
			if hasWT && op&0x80 != 0 {
				in = wt
			}
			b := fmt.Sprintf("b%d", op>>5&3)
			switch op & 0x1f % 12 {
			case 0:
				gittest.WriteFile(t, filepath.Join(in, "run_agent.py"), fmt.Sprintf("x = %d\n", n+3))
				run(in, "commit", "-q", "-a", "-m", "change")
			case 1:
				run(in, "branch", "-f", b, first)
			case 2:
				run(in, "branch", "-m", b)
			case 3:
				run(in, "branch", "-D", b)
			case 4:
				run(in, "symbolic-ref", "HEAD", "refs/heads/"+b)
			case 5:
				run(in, "pack-refs", "--all")
			case 6:
				run(in, "gc", "-q", "--prune=now")
			case 7:
				if !hasWT {
					run(dir, "worktree", "add", "-q", "-f", wt, first)
					_, err := os.Stat(wt)
					hasWT = err == nil
				}
			case 8:
				run(in, "checkout", "-q", "-f", b)
			case 9:
				run(in, "checkout", "-q", "-f", "--detach", first)
			case 10:
				var stdin strings.Builder
				for i := range 200 {
					fmt.Fprintf(&stdin, "create refs/heads/m%d/%04d %s\n", n, i, first)
				}
				cmd := gittest.Command(in, "update-ref", "--stdin")
				cmd.Stdin = strings.NewReader(stdin.String())
				_ = cmd.Run()
			case 11:
				run(in, "symbolic-ref", "refs/heads/"+b, "refs/heads/main")
			}
			checkAgainstGit(t, filepath.Join(dir, "run_agent.py"), true)
			if hasWT {
				checkAgainstGit(t, filepath.Join(wt, "run_agent.py"), true)
			}
		}
	})
}
