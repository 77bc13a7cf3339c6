// Command runtimeguard shows what a runtime guard sees of a checkout, checks
// it against a revision, classifies update markers, and watches a checkout
// for changes. It never restarts anything.
//
// Usage:
//
//	runtimeguard demo
//	runtimeguard status --module FILE [--home DIR] [--python PATH] [--json]
//	runtimeguard check  --module FILE --expect REV [--home DIR] [--python PATH]
//	runtimeguard marker PATH
//	runtimeguard watch  --module FILE [--home DIR] [--python PATH] [--interval D]
//
// Exit codes: 0 success (and, for check, a current runtime), 1 an error,
// 2 a usage error, 3 a stale runtime (check).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	exitStale = 3
)

const usage = `runtimeguard: guard a server against a Git checkout that moved under it

Usage:
  runtimeguard demo                  the whole story on a throwaway checkout
  runtimeguard status --module FILE  everything the guard sees of a checkout
  runtimeguard check --module FILE --expect REV
                                     exit 0 when current, 3 and the 409 JSON when stale
  runtimeguard marker PATH           the state of an update marker
  runtimeguard watch --module FILE   print a line each time the state changes

Run 'runtimeguard COMMAND --help' for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "demo":
		err = cmdDemo(rest, stdout, stderr)
	case "status":
		err = cmdStatus(rest, stdout, stderr)
	case "check":
		err = cmdCheck(rest, stdout, stderr)
	case "marker":
		err = cmdMarker(rest, stdout, stderr)
	case "watch":
		err = cmdWatch(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "runtimeguard: unknown command %q\nRun 'runtimeguard help' for usage.\n", cmd)
		return exitUsage
	}
	var ue usageError
	var ce exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "runtimeguard %s: %s\nRun 'runtimeguard %s --help' for usage.\n", cmd, ue.msg, cmd)
		return exitUsage
	case errors.As(err, &ce):
		return int(ce)
	}
	fmt.Fprintf(stderr, "runtimeguard %s: %v\n", cmd, err)
	return exitError
}

// usageError is a command line that does not fit the command.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitCode ends a command with a code after it printed what it had to say.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// guardFlags are the flags every command that binds a guard takes.
type guardFlags struct {
	module, home, python string
}

func (f *guardFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.module, "module", "", "the module `FILE` the server loaded (required)")
	fs.StringVar(&f.home, "home", "", "the `DIR` holding the update marker (default $HERMES_HOME or ~/.hermes)")
	fs.StringVar(&f.python, "python", "", "the agent's interpreter `PATH`, as configured")
}

// newFlagSet returns a flag set that prints its usage to stderr and
// reports errors to the caller.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: runtimeguard %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args and rejects positional arguments beyond want. The flag
// package prints its own errors and the usage.
func parse(fs *flag.FlagSet, args []string, want int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return exitCode(exitUsage)
	}
	if fs.NArg() != want {
		if want == 0 {
			return usagef("unexpected argument %q", fs.Arg(0))
		}
		return usagef("want %d argument(s), got %d", want, fs.NArg())
	}
	return nil
}
