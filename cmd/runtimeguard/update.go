package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/quote"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

const updateDoc = `Runs COMMAND (such as git pull --ff-only, or a deploy script) as an updater
that speaks the update protocol a runtime guard reads:

  1. take the layout's lock file exclusively (--lock; refuse if it is held),
     and the updater's kernel lock on the checkout (hermes-update.lock in
     its common Git directory) as hermes update takes it: refuse if another
     update's processes hold it;
  2. refuse if another live updater holds the in-progress marker;
  3. write the marker (this process's ID, the time and its creation
     time; claimed exclusively, where none was and where a stale one
     was, so of two updaters started at once one goes on), record HEAD;
     the claim and the release hold the updater's own sidecar lock,
     <marker>.lock, as Hermes's marker.sh does, and leave it in place;
  4. write a receipt with outcome "running"; every receipt names the
     checkout it updates (runtimeguard_checkout: its top-level directory),
     so that a guard of another checkout sharing the home never takes it
     for its own;
  5. run COMMAND;
  6. write the receipt: "success" only if COMMAND exited 0, HEAD is
     readable and every install root was searched and holds no recovery
     marker; "failed" otherwise; each atomically and durably, as latest
     and as a file of its own;
  7. remove the marker, release the lock.

COMMAND runs in the top-level directory of the module's worktree (--dir
to choose another), holding the locks too (as descriptors 3 and up, on
Unix), so that they outlive a killed tool until COMMAND and its children
end; a --module in no
Git worktree is refused before anything runs. The tool exits with
COMMAND's exit status when it ran and failed; 1 when it could not run,
was killed by a signal, or the receipt says failed for another reason; 7
when a file system did not answer within 5s (past any wait for a lock):
before anything ran, or, once it ran, at a read or write, leaving the
receipt as it was last written (if "running", naming a writer that is
gone) and the marker; 0 for a success receipt.

The home must be a directory that exists, and so must the directories of
the marker and the lock file: update makes none of them (a typo in --home
is a usage error, and nothing is written), only the receipts' directory
in the home, as hermes update makes it.

A guarded server with a reload plan loads the new code only on such a
success receipt. Do not wrap an updater that keeps its own marker and
receipt, such as hermes update: it speaks the protocol already, and would
find the marker taken.
`

// stat is os.Stat of path within readTimeout (what names it): a
// timeoutError past it.
func stat(what, path string) (fs.FileInfo, error) {
	type found struct {
		fi  fs.FileInfo
		err error
	}
	r, err := touch(what, path, func() (r found) {
		r.fi, r.err = os.Stat(path)
		return r
	})
	if err != nil {
		return nil, err
	}
	return r.fi, r.err
}

// checkDirs refuses, before anything is written, a home that is no
// directory and a marker or lock file whose directory is missing: a typo
// (--home /typo) or a variable meant for another machine, where update
// would make the directories from the root down and leave receipts in
// them. Only the receipts' directory is made, as the updater makes it.
func checkDirs(gf *guardFlags, paths runtimeguard.Paths) error {
	home := "the default home"
	switch {
	case set(gf.fs, "home"):
		home = "--home"
	case gf.homeEnv != "" && os.Getenv(gf.homeEnv) != "":
		home = "$" + gf.homeEnv
	}
	fi, err := stat(home+" "+quote.Text(paths.Home), paths.Home)
	var te timeoutError
	switch {
	case errors.As(err, &te):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return usagef("%s %s: no such directory (update makes no home)", home, quote.Text(paths.Home))
	case err != nil:
		return usagef("%s %s: %s", home, quote.Text(paths.Home), quote.Text(err.Error()))
	case !fi.IsDir():
		return usagef("%s: %s is not a directory", home, quote.Text(paths.Home))
	}
	for _, f := range []struct{ flag, rel, path string }{{"--marker", gf.marker, paths.Marker}, {"--lock", gf.lock, paths.Lock}} {
		if f.path == "" {
			continue
		}
		dir := filepath.Dir(f.path)
		fi, err := stat(f.flag+" "+quote.Text(f.rel)+": its directory "+quote.Text(dir), dir)
		if errors.As(err, &te) {
			return err
		}
		if err != nil || !fi.IsDir() {
			return usagef("%s %s: its directory %s is missing from the home", f.flag, quote.Text(f.rel), quote.Text(dir))
		}
	}
	// The receipts' directory, which update makes where it is missing: one
	// on a file system that does not answer is given up on now too, before
	// the marker is read there.
	dir := filepath.Dir(paths.Receipt)
	if _, err := stat("--receipt "+quote.Text(gf.receipt)+": its directory "+quote.Text(dir), dir); errors.As(err, &te) {
		return err
	}
	return nil
}

func cmdUpdate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newCommand("update", "update --module FILE [flags] -- COMMAND [ARGS...]", stdout, stderr)
	c.doc = updateDoc
	var gf guardFlags
	gf.register(c.fs)
	wait := c.fs.Duration("wait", 5*time.Second, "how long to wait for the lock, a `DURATION` (a reload's plan holds it while the server hands over)")
	workDir := c.fs.String("dir", "", "the `DIR` COMMAND runs in (default the top level of the module's worktree)")
	if err := c.parse(args, -1); err != nil {
		return err
	}
	paths, err := gf.resolve()
	if err != nil {
		return err
	}
	switch {
	case gf.module == "":
		return usagef("--module is required")
	case len(c.args) == 0:
		return usagef("no COMMAND to run after --")
	case c.args[0] == "":
		return usagef("the COMMAND after -- is empty: nothing to run")
	case *wait < 0:
		return usagef("--wait must not be negative")
	case *workDir == "" && set(c.fs, "dir"):
		// "--dir $UNSET": not a wish for the default directory.
		return usagef("--dir is empty: leave it out for the worktree's top level")
	}
	// Refuse before anything is written: a typo in --module must not run
	// COMMAND (git pull) wherever the tool was started.
	if err := gf.checkModule(); err != nil {
		return err
	}
	ck, err := gf.inspect()
	var te timeoutError
	if errors.As(err, &te) {
		return err
	}
	if ck.TopLevel == "" {
		if err != nil {
			return fmt.Errorf("--module %s: %w", quote.Text(gf.module), err)
		}
		return fmt.Errorf("--module %s is in no Git worktree (%s)", quote.Text(gf.module), quote.Text(ck.Reason))
	}
	dir := cmp.Or(*workDir, ck.TopLevel)
	if fi, err := stat("the directory "+quote.Text(dir)+" COMMAND runs in", dir); errors.As(err, &te) {
		return err
	} else if err != nil {
		return usagef("--dir: %s", quote.Text(err.Error()))
	} else if !fi.IsDir() {
		return usagef("--dir: %s is not a directory", quote.Text(dir))
	}
	switch {
	case paths.Home == "" && gf.homeEnv == "":
		return usagef("no home directory is known: set --home")
	case paths.Home == "":
		return usagef("no home directory is known: set --home or $%s", quote.Text(gf.homeEnv))
	case paths.Receipt == "":
		return usagef("--receipt is empty: update writes a receipt")
	}
	if err := checkDirs(&gf, paths); err != nil {
		return err
	}
	opts := gf.options()
	// The paths are absolute (anchor), so that a command that removes the
	// directory the tool was started in leaves the reads after it theirs.
	opts.HomeDir = paths.Home
	// A look at the updater's files that fails proves nothing: the markers
	// may live, the recovery markers were not looked for.
	observe := func() (runtimeguard.Observation, string) {
		o, err := runtimeguard.Observe(opts)
		if err != nil {
			return o, "the updater's files cannot be read: " + err.Error()
		}
		return o, ""
	}
	checkoutLock := opts.Layout.CheckoutLock
	if checkoutLock != "" {
		// Where a guard probes it: found from the module's directory as
		// git finds the repository.
		type found struct {
			l   updater.CheckoutLockPaths
			err error
		}
		r, terr := touch("the checkout lock of "+quote.Text(ck.TopLevel), filepath.Dir(ck.ModulePath), func() (r found) {
			r.l, r.err = updater.FindCheckoutLock(filepath.Dir(ck.ModulePath), checkoutLock)
			return r
		})
		if terr != nil {
			return terr
		}
		l, err := r.l, r.err
		if err != nil {
			return fmt.Errorf("the checkout lock of %s cannot be found: %w", quote.Text(ck.TopLevel), err)
		}
		checkoutLock = l.Path
	}
	dog := newWatchdog(stderr) // Run disarms it as it returns
	res, err := updater.System.Run(ctx, updater.Update{
		Home:   paths.Home,
		Marker: paths.Marker, Receipt: paths.Receipt, Lock: paths.Lock, LockWait: *wait,
		CheckoutLock: checkoutLock,
		Judge:        updater.System.Judge(runtimeguard.DefaultMaxMarkerAge),
		Argv:         c.args, Dir: gf.abs(dir), Env: os.Environ(), Stdin: os.Stdin, Stdout: stdout, Stderr: stderr,
		Markers: func() (updater.Verdict, string) {
			o, why := observe() // every home's marker, where the layout has profiles
			if why != "" {
				return updater.Verdict{Life: updater.Unsure, Reason: why}, paths.Marker
			}
			return updater.Verdict{Life: lives[o.Marker], Reason: o.MarkerReason}, o.MarkerPath
		},
		Inspect: func() (string, string, string, error) {
			ck, err := gf.inspect()
			return ck.Revision, ck.Reason, ck.TopLevel, err
		},
		Step: dog.step, Holds: dog.hold,
		Leftover: func() ([]string, string) {
			o, why := observe()
			return o.RecoveryMarkers, cmp.Or(why, o.RecoveryProblem)
		},
	})
	if err != nil && res.Receipt.UpdateID == "" {
		return err // nothing ran
	}
	if res.Failure == "" && err == nil {
		fmt.Fprintf(stderr, "runtimeguard update: success: %s -> %s (%s)\n", orNone(res.Receipt.From), res.Receipt.To, quote.Text(paths.Receipt))
	} else if res.Failure != "" {
		fmt.Fprintf(stderr, "runtimeguard update: failed: %s (%s)\n", quote.Text(res.Failure), quote.Text(paths.Receipt))
	}
	switch {
	case err != nil:
		return err
	case res.RunErr == nil && res.ExitCode > 0:
		return exitCode(res.ExitCode)
	case res.Failure != "":
		return exitCode(exitError)
	}
	return nil
}

// lives are the marker states a guard reports, each with what the marker
// proves of its update in the updater's words: a claim obeys the guard's
// verdict.
var lives = map[runtimeguard.MarkerState]updater.Life{
	runtimeguard.MarkerAbsent:    updater.NoUpdate,
	runtimeguard.MarkerAbandoned: updater.Ended,
	runtimeguard.MarkerUnknown:   updater.Unsure,
	runtimeguard.MarkerActive:    updater.Live,
}

// stateOf is the marker state a guard reports of a marker that proves l.
func stateOf(l updater.Life) runtimeguard.MarkerState {
	for s, x := range lives {
		if x == l {
			return s
		}
	}
	return runtimeguard.MarkerUnknown
}

// watchdog ends the process when a step of an update that touches a file
// system does not end within readTimeout past its rightful wait for a
// lock: a write that waits on a file system that stopped answering cannot
// be called off, and a process that ends releases its locks. The locks
// the run holds are closed first: a process one of whose threads waits on
// a FUSE file system that does not answer does not end until it answers.
// The marker and the receipt stay as the file system last took them.
type watchdog struct {
	stderr io.Writer
	mu     sync.Mutex
	timer  *time.Timer
	steps  int        // counts the calls of step: a timer of an earlier one ends nothing
	held   []*os.File // the locks the run holds (Update.Holds)
}

func newWatchdog(stderr io.Writer) *watchdog { return &watchdog{stderr: stderr} }

// hold adds f to the locks closed before the process ends.
func (w *watchdog) hold(f *os.File) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held = append(w.held, f)
}

// step disarms the watchdog and, unless what is "", arms it for the step
// that touches what and may rightly wait wait for a lock.
func (w *watchdog) step(what string, wait time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.steps++
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if what == "" {
		return
	}
	n := w.steps
	limit := wait + readTimeout
	if limit < wait {
		limit = math.MaxInt64 // a wait past any time (--wait 2562047h)
	}
	w.timer = time.AfterFunc(limit, func() {
		w.mu.Lock()
		if w.steps != n {
			w.mu.Unlock() // the step ended as the timer fired
			return
		}
		// The locks closed and the line said aside, each of which may
		// wait on the hung file system (stderr may be a file there too),
		// for a second at most.
		var wg sync.WaitGroup
		for _, f := range w.held {
			wg.Go(func() { f.Close() })
		}
		wg.Go(func() { fmt.Fprintf(w.stderr, "runtimeguard update: %s\n", quote.Text(timeoutError{what}.Error())) })
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
		}
		os.Exit(exitTimeout)
	})
}
