package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/runtimeguard/runtimeguard"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	exitStale = 3

	// The marker command's codes past the absent marker's 0.
	exitMarkerActive  = 4
	exitMarkerStale   = 5
	exitMarkerUnknown = 6
)

const usage = `runtimeguard: guard a server against a Git checkout that moved under it

Usage:
  runtimeguard demo                  the whole story on a throwaway checkout
  runtimeguard status --module FILE  everything the guard sees of a checkout
  runtimeguard check --module FILE --expect REV
                                     exit 0 when current, 3 and the 409 JSON
                                     when stale
  runtimeguard marker PATH           the state of an update marker, and why;
                                     exit 0 absent, 4 active, 5 stale, 6 unknown
  runtimeguard watch --module FILE   print a line each time the state changes
  runtimeguard update --module FILE -- COMMAND [ARGS...]
                                     run an updater under the update protocol
  runtimeguard version               the version of this program (--version)

Run 'runtimeguard COMMAND -h' for a command's flags.
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
	case "update":
		err = cmdUpdate(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		err = cmdVersion(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		if cmd == "help" && len(rest) > 1 {
			fmt.Fprintf(stderr, "runtimeguard help: want at most one command, got %d\nRun 'runtimeguard help' for usage.\n", len(rest))
			return exitUsage
		}
		if cmd == "help" && len(rest) == 1 && rest[0] != "help" {
			return run(ctx, []string{rest[0], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "runtimeguard: unknown command %q\nRun 'runtimeguard help' for usage.\n", cmd)
		return exitUsage
	}
	var ue usageError
	var ce exitCode
	var le libraryError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "runtimeguard %s: %s\nRun 'runtimeguard %s -h' for usage.\n", cmd, ue.msg, cmd)
		return exitUsage
	case errors.As(err, &ce):
		return int(ce)
	case errors.As(err, &le):
		fmt.Fprintln(stderr, le.err) // as the library says it, its prefix included
		return exitError
	}
	fmt.Fprintf(stderr, "runtimeguard %s: %v\n", cmd, err)
	return exitError
}

// libraryError is an error of the runtimeguard package, printed as it is:
// the package names itself.
type libraryError struct{ err error }

func (e libraryError) Error() string { return e.err.Error() }
func (e libraryError) Unwrap() error { return e.err }

// apiError marks err, of the runtimeguard package, to be printed as it is;
// nil stays nil.
func apiError(err error) error {
	if err == nil {
		return nil
	}
	return libraryError{err}
}

// usageError is a command line that does not fit the command.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitCode ends a command with a code after it printed what it had to say.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// command is one subcommand's flag set and how to print its usage.
type command struct {
	fs       *flag.FlagSet
	synopsis string
	doc      string   // printed after the synopsis, when set
	args     []string // the positional arguments, once parsed
	stdout   io.Writer
	stderr   io.Writer
}

// newCommand returns a command whose flag errors go to stderr and whose
// help goes to stdout.
func newCommand(name, synopsis string, stdout, stderr io.Writer) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed by parse, to the stream that fits
	return &command{fs: fs, synopsis: synopsis, stdout: stdout, stderr: stderr}
}

// printUsage prints the synopsis and, when the command has any, its flags.
func (c *command) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: runtimeguard %s\n", c.synopsis)
	if c.doc != "" {
		fmt.Fprintf(w, "\n%s", c.doc)
	}
	n := 0
	c.fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	c.fs.VisitAll(func(f *flag.Flag) {
		placeholder, text := flag.UnquoteUsage(f)
		fmt.Fprintln(w, "  "+strings.TrimSpace("--"+f.Name+" "+placeholder))
		if def := f.DefValue; def != "" && def != "false" && !strings.Contains(text, "(default") {
			text += " (default " + def + ")"
		}
		wrap(w, "        ", text, 80)
	})
}

// wrap prints text in lines of at most width columns, each after indent.
func wrap(w io.Writer, indent, text string, width int) {
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}

// parse parses args and rejects positional arguments beyond want (-1: any
// number, and flags end at the first positional argument, as for a command
// line to run). With a fixed number, flags and positional arguments may be
// mixed (marker PATH --json), up to a "--" after which all is positional.
// Help goes to standard output with exit 0; a flag error, which the flag
// package has printed, is followed by the usage on standard error and exit
// 2.
func (c *command) parse(args []string, want int) error {
	var positional []string
	for rest := args; ; {
		if err := c.fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printUsage(c.stdout)
				return exitCode(exitOK)
			}
			c.printUsage(c.stderr)
			return exitCode(exitUsage)
		}
		left := c.fs.Args()
		if len(left) == 0 {
			break
		}
		// The flag package stops at the first non-flag argument, or
		// consumes a "--" and stops after it.
		if want < 0 || len(left) < len(rest) && rest[len(rest)-len(left)-1] == "--" {
			positional = append(positional, left...)
			break
		}
		positional = append(positional, left[0])
		rest = left[1:]
	}
	if want >= 0 && len(positional) != want {
		if want == 0 {
			return usagef("unexpected argument %q", positional[0])
		}
		return usagef("want %d argument(s), got %d", want, len(positional))
	}
	c.args = positional
	return nil
}

// guardFlags are the flags of every command that reads a checkout and the
// updater's files.
type guardFlags struct {
	module, home, python string
	homeEnv, defaultHome string
	marker, receipt      string
	lock, recovery       string
	fs                   *flag.FlagSet // where they are registered
}

func (f *guardFlags) register(fs *flag.FlagSet) {
	h := runtimeguard.HermesLayout
	f.fs = fs
	fs.StringVar(&f.module, "module", "", "the module `FILE` the server loaded (required)")
	fs.StringVar(&f.home, "home", "", "the updater's home `DIR` (default $"+h.HomeEnv+" or ~/"+h.DefaultHome+": see --home-env, --default-home)")
	fs.StringVar(&f.homeEnv, "home-env", h.HomeEnv, "the environment `VARIABLE` that names the home, when --home is not given")
	fs.StringVar(&f.defaultHome, "default-home", h.DefaultHome, "the home, a `PATH` relative to the user's home directory, when neither --home nor the variable is set (none when --home-env is given without it)")
	fs.StringVar(&f.python, "python", "", "the agent's interpreter `PATH`, as configured")
	fs.StringVar(&f.marker, "marker", h.Marker, "the in-progress marker, a `PATH` relative to the home")
	fs.StringVar(&f.receipt, "receipt", h.Receipt, "the updater's latest receipt, a `PATH` relative to the home")
	fs.StringVar(&f.lock, "lock", h.Lock, "the updater's lock file, a `PATH` relative to the home (default none)")
	fs.StringVar(&f.recovery, "recovery", strings.Join(h.RecoveryMarkers, ","), "the recovery markers' file `NAMES`, separated by commas")
}

// resolve returns the paths the flags resolve to, as the library resolves
// them; flags that describe no layout are a usage error that names the
// flag.
func (f *guardFlags) resolve() (runtimeguard.Paths, error) {
	return resolveFlags(f.options())
}

// resolveFlags is resolve for the options the flags describe, with those
// of the command's own flags.
func resolveFlags(opts runtimeguard.Options) (runtimeguard.Paths, error) {
	if opts.Layout.Marker == "" {
		return runtimeguard.Paths{}, usagef("--marker must not be empty")
	}
	p, err := runtimeguard.ResolvePaths(opts)
	var oe *runtimeguard.OptionError
	if errors.As(err, &oe) {
		if flag, ok := optionFlags[oe.Field]; ok {
			return p, usagef("%s %q: %s", flag, fmt.Sprint(oe.Value), oe.Reason)
		}
	}
	return p, apiError(err)
}

// checkModule reports a --module that is missing or names no file, naming
// the path as it was given.
func (f *guardFlags) checkModule() error {
	if f.module == "" {
		return usagef("--module is required")
	}
	switch fi, err := os.Stat(f.module); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--module %s: no such file", f.module)
	case err == nil && fi.IsDir():
		return fmt.Errorf("--module %s: a directory, not the module file", f.module)
	}
	return nil
}

// set reports whether the flag was given on the command line.
func set(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// optionFlags are the flags behind the option fields an OptionError names.
var optionFlags = map[string]string{
	"Options.HomeDir": "--home", "Options.Python": "--python",
	"Layout.HomeEnv": "--home-env", "Layout.DefaultHome": "--default-home",
	"Layout.Marker": "--marker", "Layout.Receipt": "--receipt",
	"Layout.Lock": "--lock", "Layout.RecoveryMarkers": "--recovery",
	"Options.ExpectRevision": "--expect",
}

// options are the guard options the flags describe.
func (f *guardFlags) options() runtimeguard.Options {
	layout := runtimeguard.HermesLayout
	layout.HomeEnv, layout.DefaultHome = f.homeEnv, f.defaultHome
	if f.fs != nil && set(f.fs, "home-env") && !set(f.fs, "default-home") {
		layout.DefaultHome = "" // another updater's variable, not Hermes's fallback
	}
	layout.Marker, layout.Receipt, layout.Lock = f.marker, f.receipt, f.lock
	layout.RecoveryMarkers = nil
	for _, name := range strings.Split(f.recovery, ",") {
		if name = strings.TrimSpace(name); name != "" {
			layout.RecoveryMarkers = append(layout.RecoveryMarkers, name)
		}
	}
	return runtimeguard.Options{ModulePath: f.module, HomeDir: f.home, Python: f.python, Layout: layout}
}
