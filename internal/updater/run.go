package updater

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

	"github.com/runtimeguard/runtimeguard/internal/durable"
)

// ErrRefused matches the error of Run when the update must not start:
// another update or a reload holds the lock, or a marker says an update is
// running or proves nothing.
var ErrRefused = errors.New("refused")

// Update is one run of an updater command under the update protocol: the
// writer side of the files a guard reads.
type Update struct {
	// Home is the updater's home, which holds Marker, Receipt and Lock:
	// the directories between it and them are made where missing, and
	// opened, for each write, without following a link (durable.OpenIn);
	// the home itself is pinned before the command runs (durable.PinRoot),
	// so that a directory renamed there, or a link swapped in for it,
	// receives nothing. Empty: they are made as os.MkdirAll makes them.
	Home string
	// Marker is the in-progress marker to claim, and Receipt the latest
	// receipt to write (its directory also receives the receipt of the run
	// as a file of its own). Both required, absolute.
	Marker, Receipt string
	// Lock is the lock file to hold exclusively throughout; empty: none.
	Lock string
	// CheckoutLock is the updater's kernel lock on the checkout
	// (CheckoutLockPath), taken as the updater takes it and held across
	// the command and its children; empty: none.
	CheckoutLock string
	// LockWait bounds the wait for a Lock another holds.
	LockWait time.Duration
	// Judge is the classification of a marker the claim obeys (a
	// guard's: see Judge). Required.
	Judge Judge
	// Argv is the command to run, in Dir, in the environment Env (as
	// exec.Cmd takes it; required: the CLI gives os.Environ(), a test
	// gittest.Env), with the standard streams given.
	Argv           []string
	Dir            string
	Env            []string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Markers classifies the marker that says the most of every home an
	// updater may run in, and its path; one of a live update, or of one
	// that may live, refuses the update. It is read once the lock is
	// held. Nil: Marker alone, through Judge.
	Markers func() (v Verdict, path string)
	// Inspect reads the checkout once: the revision of its HEAD, or why it
	// has none (an error for a checkout that cannot be read), and its
	// top-level directory (links resolved), which each receipt names with
	// its identity (CheckoutID): a guard takes a receipt that names another
	// checkout for none of its own; "" names none. Required.
	Inspect func() (rev, none, top string, err error)
	// Step, when not nil, is told before each step of the run that touches
	// a file system the caller did not bound itself: what the step touches,
	// and how long it may rightly wait for a lock another holds. It is
	// told "" before a step the caller bounds (Markers, Inspect, Leftover)
	// and before the command: a caller that gives up on a step whose file
	// system does not answer ends the process, which releases the locks
	// (the receipt last written stays, naming a writer that is gone).
	Step func(what string, wait time.Duration)
	// Holds, when not nil, is told of each lock Run holds across steps
	// (the layout's lock, the checkout lock). A caller that gives up on a
	// step closes them before it ends the process: a process one of whose
	// threads waits on a file system that does not answer may not end
	// (FUSE), and would keep them.
	Holds func(*os.File)
	// Leftover lists the recovery markers found once the command ended,
	// and says why they could not all be looked for ("" when they were):
	// either makes the run fail. Nil: none is looked for.
	Leftover func() (present []string, why string)
}

// Result is what a run of Run did.
type Result struct {
	// Receipt is the receipt written last.
	Receipt Receipt
	// Failure says why the receipt says failed; empty for success.
	Failure string
	// ExitCode is the command's exit status; -1 when a signal ended it.
	ExitCode int
	// RunErr is why the command could not run, or nil.
	RunErr error
}

// Run runs u.Argv as an updater that speaks the update protocol: it takes
// the lock exclusively (waiting at most LockWait) and the checkout lock
// (refusing while another update's process tree holds it), refuses while a marker
// says an update runs or proves nothing, claims the marker for this
// process, writes a receipt with outcome "running", runs the command
// (which holds the lock too, as descriptor 3 on Unix, so that the lock
// outlives a killed caller until the command ends), then writes the
// receipt again: "success" only if the command exited 0, the checkout has
// a revision and no recovery marker was left, "failed" otherwise. It
// removes its own marker and releases the lock when it returns.
//
// Its error is for an update that did not run (matching ErrRefused when
// it must not) or a receipt that could not be written; a command that
// failed is a Result with a Failure.
func (e *Env) Run(ctx context.Context, u Update) (Result, error) {
	switch {
	case u.Marker == "":
		return Result{}, errors.New("no marker path: no home directory is known")
	case u.Receipt == "":
		return Result{}, errors.New("the layout has no receipt")
	case len(u.Argv) == 0:
		return Result{}, errors.New("no command to run")
	case u.Env == nil:
		return Result{}, errors.New("no environment for the command")
	case u.Inspect == nil:
		return Result{}, errors.New("no way to read the checkout's revision")
	case u.Judge == nil:
		return Result{}, errors.New("no judge of the marker")
	}
	step := u.Step
	if step == nil {
		step = func(string, time.Duration) {}
	}
	defer step("", 0) // the last of the deferred: nothing of Run is left to bound
	markers := u.Markers
	if markers == nil {
		markers = func() (Verdict, string) {
			step("the marker "+u.Marker, 0) // read here, not bounded by the caller
			return u.Judge.Read(u.Marker), u.Marker
		}
	}
	var lock *os.File
	if u.Lock != "" {
		step("the lock "+u.Lock, u.LockWait)
		d, err := durable.OpenIn(u.Home, filepath.Dir(u.Lock), true)
		if err != nil {
			return Result{}, err
		}
		lock, err = lockIn(d, filepath.Base(u.Lock), true)
		for deadline := time.Now().Add(u.LockWait); errors.Is(err, ErrLocked) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			lock, err = lockIn(d, filepath.Base(u.Lock), true)
		}
		d.Close()
		if errors.Is(err, ErrLocked) {
			return Result{}, fmt.Errorf("%w: another update or a reload holds %s", ErrRefused, u.Lock)
		}
		if err != nil {
			return Result{}, err
		}
		defer lock.Close()
		defer step("the lock "+u.Lock, 0) // as it is closed
		if u.Holds != nil {
			u.Holds(lock)
		}
	}
	var checkout *os.File
	if u.CheckoutLock != "" {
		step("the checkout lock "+u.CheckoutLock, CheckoutContentionWait)
		var err error
		checkout, err = LockCheckout(u.CheckoutLock, CheckoutContentionWait)
		if errors.Is(err, ErrCheckoutLocked) {
			return Result{}, fmt.Errorf("%w: another update of the checkout runs (%s is held)", ErrRefused, u.CheckoutLock)
		}
		if err != nil {
			return Result{}, err
		}
		defer checkout.Close()
		defer step("the checkout lock "+u.CheckoutLock, 0) // as it is closed
		if u.Holds != nil {
			u.Holds(checkout)
		}
	}
	// Read under the lock: another updater may have finished meanwhile.
	step("", 0)
	switch v, path := markers(); v.Life {
	case Live:
		return Result{}, fmt.Errorf("%w: another updater is running (%s: %s)", ErrRefused, path, v.Reason)
	case Unsure:
		return Result{}, fmt.Errorf("%w: the marker %s proves nothing (%s); remove it if no update runs", ErrRefused, path, v.Reason)
	}

	// The receipts' directory is made, or refused, before any claim.
	step("the receipts' directory "+filepath.Dir(u.Receipt), 0)
	if d, err := durable.OpenIn(u.Home, filepath.Dir(u.Receipt), true); err != nil {
		return Result{}, err
	} else {
		d.Close()
	}
	// The home is pinned: a directory renamed there, or a link swapped in
	// for it, while the command runs receives nothing of this run.
	home := durable.Root{}
	if u.Home != "" {
		step("the home "+u.Home, 0)
		var err error
		if home, err = durable.PinRoot(u.Home); err != nil {
			return Result{}, err
		}
	}
	pid, start := os.Getpid(), time.Now()
	// Claimed exclusively, where none was and where a stale one was: of
	// two updaters started at once, one goes on.
	step("the marker "+u.Marker, claimLockWait)
	if err := claimMarker(home, u.Marker, pid, start, u.Judge, u.Holds, step); err != nil {
		if errors.Is(err, ErrMarkerHeld) {
			return Result{}, fmt.Errorf("%w: another updater holds the marker (%w)", ErrRefused, err)
		}
		return Result{}, err
	}
	defer func() {
		step("the marker "+u.Marker, claimLockWait)
		removeMarkerIn(home, u.Marker, pid, start, u.Holds) // ours only
	}()
	res := Result{Receipt: Receipt{UpdateID: NewUpdateID(), Outcome: OutcomeRunning, StartedAt: start.UTC()}}
	r := &res.Receipt
	var top string
	step("", 0)
	r.From, _, top, _ = u.Inspect()
	if top != "" {
		step("the checkout "+top, 0)
	}
	r.Checkout, r.CheckoutID = checkoutOf(top)
	if err := writeReceipt(home, u.Receipt, *r, pid, step); err != nil {
		return res, err
	}

	res.ExitCode, res.RunErr = runCommand(ctx, &u, lock, checkout, step)
	r.FinishedAt = time.Now().UTC()
	after, none, top, readErr := u.Inspect()
	r.To = after
	if top != "" {
		step("the checkout "+top, 0)
	}
	r.Checkout, r.CheckoutID = checkoutOf(top)
	var left []string
	var leftWhy string
	if u.Leftover != nil {
		step("", 0)
		left, leftWhy = u.Leftover()
	}
	switch {
	case res.RunErr != nil:
		res.Failure = res.RunErr.Error()
	case res.ExitCode < 0:
		res.Failure = u.Argv[0] + " was killed by a signal"
	case res.ExitCode != 0:
		res.Failure = fmt.Sprintf("%s exited %d", u.Argv[0], res.ExitCode)
	case readErr != nil:
		res.Failure = "the checkout cannot be read after the update: " + readErr.Error()
	case after == "":
		res.Failure = "the module has no revision after the update: " + none
	case len(left) > 0:
		res.Failure = "the recovery marker " + left[0] + " was left"
	case leftWhy != "":
		res.Failure = "the recovery markers cannot all be looked for after the update: " + leftWhy
	}
	r.Outcome = OutcomeSuccess
	if res.Failure != "" {
		r.Outcome = OutcomeFailed
	}
	return res, writeReceipt(home, u.Receipt, *r, pid, step)
}

// checkoutOf is the checkout whose top level is top, as a receipt names it,
// and its identity (CheckoutID); "" for none.
func checkoutOf(top string) (dir, id string) {
	if top != "" {
		id, _ = CheckoutID(top) // none where it cannot be told: the receipt is then no checkout's
	}
	return top, id
}

// runCommand runs u.Argv and returns its exit status. The context's end
// interrupts the command, which then has thirty seconds to end.
func runCommand(ctx context.Context, u *Update, lock, checkout *os.File, step func(string, time.Duration)) (int, error) {
	// Finding the command on PATH, its directory and its file are reads of
	// file systems too: announced until it started, the wait for it not.
	step("the command "+u.Argv[0]+" (in "+u.Dir+")", 0)
	cmd := exec.CommandContext(ctx, u.Argv[0], u.Argv[1:]...)
	cmd.Dir, cmd.Env = u.Dir, u.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = u.Stdin, u.Stdout, u.Stderr
	if lock != nil && runtime.GOOS != "windows" {
		// The command holds the lock too (as descriptor 3): a caller that
		// is killed leaves the lock held until its command ends, so no
		// other update and no reload plan starts while the command runs.
		cmd.ExtraFiles = []*os.File{lock}
	}
	if checkout != nil && runtime.GOOS != "windows" {
		// The checkout lock too, as the updater passes it to its
		// children: the checkout stays locked until the last of them
		// ends, whatever ends this process.
		cmd.ExtraFiles = append(cmd.ExtraFiles, checkout)
	}
	cmd.Cancel = func() error {
		if runtime.GOOS == "windows" {
			return cmd.Process.Kill()
		}
		return cmd.Process.Signal(os.Interrupt)
	}
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Start()
	step("", 0)
	if err == nil {
		err = cmd.Wait()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}
