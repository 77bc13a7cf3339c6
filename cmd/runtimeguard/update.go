package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

const updateDoc = `Runs COMMAND (such as git pull --ff-only, or a deploy script) as an updater
that speaks the update protocol a runtime guard reads:

  1. take the layout's lock file exclusively (--lock; refuse if it is held);
  2. refuse if another live updater holds the in-progress marker;
  3. write the marker (this process's ID and the time; claimed
     exclusively, where none was and where a stale one was, so of two
     updaters started at once one goes on), record HEAD;
  4. write a receipt with outcome "running";
  5. run COMMAND;
  6. write the receipt: "success" only if COMMAND exited 0, HEAD is
     readable and no recovery marker was left; "failed" otherwise; each
     atomically and durably, as latest and as a file of its own;
  7. remove the marker, release the lock.

COMMAND runs in the top-level directory of the module's worktree (--dir
to choose another), holding the lock too (as descriptor 3, on Unix), so
that the lock outlives a killed tool until COMMAND ends; a --module in no
Git worktree is refused before anything runs. The tool exits with
COMMAND's exit status when it ran and failed; 1 when it could not run,
was killed by a signal, or the receipt says failed for another reason; 0
for a success receipt.

A guarded server with a reload plan loads the new code only on such a
success receipt. Do not wrap an updater that keeps its own marker and
receipt, such as hermes update: it speaks the protocol already, and would
find the marker taken.
`

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
	if err := gf.validate(); err != nil {
		return err
	}
	argv := c.args
	switch {
	case gf.module == "":
		return usagef("--module is required")
	case len(argv) == 0:
		return usagef("no COMMAND to run after --")
	case *wait < 0:
		return usagef("--wait must not be negative")
	}
	// Refuse before anything is written: a typo in --module must not run
	// COMMAND (git pull) wherever the tool was started.
	if err := gf.checkModule(); err != nil {
		return usagef("%v", err)
	}
	if ck, err := gitread.Inspect(gf.module); ck.TopLevel == "" {
		if err != nil {
			return usagef("--module: %v", err)
		}
		return usagef("--module: %s is in no Git worktree (%s)", gf.module, ck.Reason)
	}
	if *workDir != "" {
		if fi, err := os.Stat(*workDir); err != nil {
			return usagef("--dir: %v", err)
		} else if !fi.IsDir() {
			return usagef("--dir: %s is not a directory", *workDir)
		}
	}
	o, err := runtimeguard.Observe(gf.options())
	if err != nil {
		return err
	}
	switch {
	case o.MarkerPath == "":
		if gf.homeEnv == "" {
			return errors.New("no home directory is known: set --home")
		}
		return fmt.Errorf("no home directory is known: set --home or $%s", gf.homeEnv)
	case o.ReceiptPath == "":
		return errors.New("the layout has no receipt (--receipt)")
	}

	var lock *os.File
	if o.LockPath != "" {
		if err := os.MkdirAll(filepath.Dir(o.LockPath), 0o755); err != nil {
			return err
		}
		lock, err = updater.Lock(o.LockPath, true)
		for deadline := time.Now().Add(*wait); errors.Is(err, updater.ErrLocked) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			lock, err = updater.Lock(o.LockPath, true)
		}
		if errors.Is(err, updater.ErrLocked) {
			return fmt.Errorf("refused: another update or a reload holds %s", o.LockPath)
		}
		if err != nil {
			return err
		}
		defer lock.Close()
		// Read the marker again under the lock: another updater may
		// have finished in between.
		if o, err = runtimeguard.Observe(gf.options()); err != nil {
			return err
		}
	}
	switch o.Marker {
	case runtimeguard.MarkerActive:
		return fmt.Errorf("refused: another updater is running (%s: %s)", o.MarkerPath, o.MarkerReason)
	case runtimeguard.MarkerUnknown:
		return fmt.Errorf("refused: the marker %s proves nothing (%s); remove it if no update runs", o.MarkerPath, o.MarkerReason)
	}

	pid, start := os.Getpid(), time.Now()
	// Claimed exclusively, where none was and where a stale one was: of
	// two updaters started at once, one goes on.
	if err := updater.ClaimMarker(o.MarkerPath, pid, start, updater.GuardJudge(runtimeguard.DefaultMaxMarkerAge)); err != nil {
		if errors.Is(err, updater.ErrMarkerHeld) {
			return fmt.Errorf("refused: another updater holds the marker (%v)", err)
		}
		return err
	}
	defer updater.RemoveMarker(o.MarkerPath, pid, start) // ours only
	r := updater.Receipt{UpdateID: updater.NewUpdateID(), Outcome: updater.OutcomeRunning, StartedAt: start.UTC()}
	before, _ := gitread.Inspect(gf.module)
	r.From = before.Revision
	dir := *workDir
	if dir == "" {
		dir = cmpOr(before.TopLevel, before.SourceDir)
	}
	if err := updater.WriteReceipt(o.ReceiptPath, r, pid); err != nil {
		return err
	}

	code, runErr := runUpdater(ctx, dir, argv, lock, stdout, stderr)
	r.FinishedAt = time.Now().UTC()
	after, readErr := gitread.Inspect(gf.module)
	r.To = after.Revision
	observed, err := runtimeguard.Observe(gf.options())
	if err != nil {
		return err
	}
	why := ""
	switch {
	case runErr != nil:
		why = runErr.Error()
	case code < 0:
		why = argv[0] + " was killed by a signal"
	case code != 0:
		why = fmt.Sprintf("%s exited %d", argv[0], code)
	case readErr != nil:
		why = "the checkout cannot be read after the update: " + readErr.Error()
	case r.To == "":
		why = "the module has no revision after the update: " + after.Reason
	case len(observed.RecoveryMarkers) > 0:
		why = "the recovery marker " + observed.RecoveryMarkers[0] + " was left"
	}
	r.Outcome = updater.OutcomeSuccess
	if why != "" {
		r.Outcome = updater.OutcomeFailed
	}
	if err := updater.WriteReceipt(o.ReceiptPath, r, pid); err != nil {
		return err
	}
	if why == "" {
		fmt.Fprintf(stderr, "runtimeguard update: success: %s -> %s (%s)\n", orNone(r.From), r.To, o.ReceiptPath)
	} else {
		fmt.Fprintf(stderr, "runtimeguard update: failed: %s (%s)\n", why, o.ReceiptPath)
	}
	switch {
	case runErr != nil:
		return exitCode(exitError)
	case code > 0:
		return exitCode(code)
	case code != 0: // killed by a signal
		return exitCode(exitError)
	case why != "":
		return exitCode(exitError)
	}
	return nil
}

// runUpdater runs argv with the tool's standard streams and returns its
// exit status. A signal to the tool interrupts the command, which has
// thirty seconds to end.
func runUpdater(ctx context.Context, dir string, argv []string, lock *os.File, stdout, stderr io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if lock != nil && runtime.GOOS != "windows" {
		// The command holds the lock too (as descriptor 3): a tool that is
		// killed leaves the lock held until its command ends, so no other
		// update and no reload plan starts while the command still runs.
		cmd.ExtraFiles = []*os.File{lock}
	}
	cmd.Cancel = func() error {
		if runtime.GOOS == "windows" {
			return cmd.Process.Kill()
		}
		return cmd.Process.Signal(os.Interrupt)
	}
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// cmpOr is the first of a and b that is not empty.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
