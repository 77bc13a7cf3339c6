package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/bounded"
	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/quote"
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

	// A file system did not answer within readTimeout: the command gave
	// up.
	exitTimeout = 7
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
	if cmd == "--version" || cmd == "-version" {
		cmd = "version" // and named so in its errors
	}
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
	case "version":
		err = cmdVersion(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		// Each form takes at most a command, whose help it prints.
		switch {
		case len(rest) > 1:
			fmt.Fprintf(stderr, "runtimeguard help: want at most one command, got %d\nRun 'runtimeguard --help' for usage.\n", len(rest))
			return exitUsage
		case len(rest) == 1 && !slices.Contains([]string{"help", "-h", "-help", "--help"}, rest[0]):
			return run(ctx, []string{rest[0], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "runtimeguard: unknown command %q\nRun 'runtimeguard --help' for usage.\n", cmd)
		return exitUsage
	}
	var ue usageError
	var ce exitCode
	var le libraryError
	var te timeoutError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "runtimeguard %s: %s\nRun 'runtimeguard %s --help' for usage.\n", cmd, quote.Text(ue.msg), cmd)
		return exitUsage
	case errors.As(err, &ce):
		return int(ce)
	case errors.As(err, &te):
		fmt.Fprintf(stderr, "runtimeguard %s: %s\n", cmd, quote.Text(te.Error()))
		return exitTimeout
	case errors.As(err, &le):
		// As the library says it, its prefix included.
		msg, ok := strings.CutPrefix(le.err.Error(), "runtimeguard: ")
		if !ok {
			fmt.Fprintln(stderr, quote.Text(msg))
		} else {
			fmt.Fprintln(stderr, "runtimeguard: "+quote.Text(msg))
		}
		if errors.Is(le.err, runtimeguard.ErrReadTimeout) {
			return exitTimeout
		}
		return exitError
	}
	fmt.Fprintf(stderr, "runtimeguard %s: %s\n", cmd, quote.Text(err.Error()))
	return exitError
}

// readTimeout bounds each of a command's own touches of the file system
// (and the library bounds its own reads by it, its default ReadTimeout):
// a file system that stopped answering (a hard NFS mount that lost its
// server) makes the command give up, saying what it waited for, rather
// than hang.
const readTimeout = runtimeguard.DefaultReadTimeout

// timeoutError is a touch of the file system the command gave up on:
// what names what it waited for.
type timeoutError struct{ what string }

func (e timeoutError) Error() string {
	return "gave up: " + e.what + " did not answer within " + readTimeout.String()
}

// touch runs fn, which reads path (what names it), on the process's
// executor of path (the library's executors' kind: shared by every touch
// of the same path, and counted in the process's bound of workers), and
// waits for it at most readTimeout.
func touch[T any](what, path string, fn func() T) (T, error) {
	var zero T
	x := bounded.Shared("runtimeguard command\x00"+path, nil)
	t, stuck := bounded.Submit(context.Background(), x, nil, readTimeout, func(t *bounded.Task[T]) { t.Val = fn() }, nil)
	switch {
	case stuck != nil && stuck.Full != "":
		return zero, timeoutError{what + " (it was not read: " + stuck.Full + ")"}
	case stuck != nil:
		return zero, timeoutError{what}
	case t.Err != nil:
		return zero, t.Err
	}
	return t.Val, nil
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
	fs.SetOutput(io.Discard) // parse says what went wrong, in the command's words
	fs.Usage = func() {}     // printed by parse on --help
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
// Help goes to standard output with exit 0; a flag error is a usage error
// that names the flag as the usage does, with two dashes.
func (c *command) parse(args []string, want int) error {
	var positional []string
	for rest := args; ; {
		if err := c.fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printUsage(c.stdout)
				return exitCode(exitOK)
			}
			return usageError{flagError(err)}
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

// flagErrors are the flag package's errors, which name a flag with one
// dash: "flag provided but not defined: -name", "flag needs an argument:
// -name", "invalid value "v" for flag -name: why", "invalid boolean value
// "v" for -name: why", "invalid boolean flag name: why".
var flagErrors = regexp.MustCompile(`^(?s)(?:(flag provided but not defined): -(.*)|(flag needs an argument): -(.*)|invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-([^:]*): (.*)|invalid boolean flag ([^:]*): (.*))$`)

// flagError says a flag error of the flag package in the usage's words:
// the flag with two dashes, its name and value quoted where they hold
// control characters.
func flagError(err error) string {
	m := flagErrors.FindStringSubmatch(err.Error())
	switch {
	case m == nil:
		return err.Error()
	case m[1] != "":
		return "unknown flag --" + quote.Text(m[2])
	case m[3] != "":
		return "flag --" + quote.Text(m[4]) + " needs a value"
	case m[6] != "":
		return "--" + quote.Text(m[6]) + " " + m[5] + ": " + m[7]
	}
	return "--" + quote.Text(m[8]) + ": " + m[9]
}

// guardFlags are the flags of every command that reads a checkout and the
// updater's files.
type guardFlags struct {
	module, home, python string
	homeEnv, defaultHome string
	marker, receipt      string
	lock, recovery       string
	fs                   *flag.FlagSet // where they are registered
	// cwd is the working directory, read once (see anchor) where a path
	// flag is relative: the library is given absolute paths, so that no
	// read of the working directory it would make waits unbounded.
	cwd string
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
	if err := f.checkHome(); err != nil {
		return runtimeguard.Paths{}, err
	}
	return resolveFlags(f.options())
}

// checkHome refuses a --home given empty: a variable that was not set
// ("--home $UNSET"), not a wish for the default home, where update would
// write its marker and receipts.
func (f *guardFlags) checkHome() error {
	if f.home == "" && f.fs != nil && set(f.fs, "home") {
		return usagef("--home is empty: leave it out for the default home")
	}
	return f.anchor()
}

// anchor reads the working directory, within readTimeout, where a path
// flag (or the home's variable, where --home is not given) is relative: a
// working directory on a file system that stopped answering ($PWD, which
// os.Getwd stats first on Unix, or "." itself) is a timeoutError, not a
// wait. Windows asks the system for it, and reads no file.
func (f *guardFlags) anchor() error {
	if f.cwd != "" || runtime.GOOS == "windows" || !slices.ContainsFunc([]string{f.module, f.homeGiven(), f.python}, isRelative) {
		return nil
	}
	type found struct {
		dir string
		err error
	}
	r, err := touch("the working directory", ".", func() (r found) {
		r.dir, r.err = os.Getwd()
		return r
	})
	if err == nil {
		err = r.err
	}
	f.cwd = r.dir
	return err
}

// isRelative reports whether p is a path relative to the working directory.
func isRelative(p string) bool { return p != "" && !filepath.IsAbs(p) }

// abs is p made absolute with the working directory anchor read, not
// cleaned: a ".." after a symbolic link leads to the parent of the link's
// target, as the system resolves p from the working directory (and as
// gitread.Abs keeps it). Without one read, p is as given.
func (f *guardFlags) abs(p string) string {
	if isRelative(p) && f.cwd != "" {
		return f.cwd + string(filepath.Separator) + p
	}
	return p
}

// homeGiven is --home, or where it is not given, the value of the home's
// variable (--home-env).
func (f *guardFlags) homeGiven() string {
	if f.home == "" && f.homeEnv != "" {
		return os.Getenv(f.homeEnv)
	}
	return f.home
}

// resolveFlags is resolve for the options the flags describe, with those
// of the command's own flags.
func resolveFlags(opts runtimeguard.Options) (runtimeguard.Paths, error) {
	if opts.Layout.Marker == "" {
		return runtimeguard.Paths{}, usagef("--marker must not be empty")
	}
	// The paths only: nothing is read (not even the links of a home of
	// profiles, which the paths do not depend on). What needs the module
	// (ExpectRevision, ExpectReceipt) is checked where the command binds.
	opts.ModulePath, opts.ExpectRevision, opts.ExpectReceipt = "", "", ""
	opts.Layout.Profiles = ""
	g, err := runtimeguard.New(opts)
	if err != nil {
		return runtimeguard.Paths{}, optionUsage(err)
	}
	defer g.Close()
	return g.Paths(), nil
}

// optionUsage is err, of the runtimeguard package, as the command says
// it: an option that describes no guard is a usage error that names its
// flag (New tells some only once it read the checkout, such as an
// --expect of the other object format); any other error is the library's.
func optionUsage(err error) error {
	var oe *runtimeguard.OptionError
	if errors.As(err, &oe) {
		if flag, ok := optionFlags[oe.Field]; ok {
			return usagef("%s %q: %s", flag, fmt.Sprint(oe.Value), oe.Reason)
		}
	}
	return apiError(err)
}

// checkModule reports a --module that is missing or names no regular file,
// naming the path as it was given: a usage error in every command; one
// whose file system does not answer within readTimeout, a timeoutError.
func (f *guardFlags) checkModule() error {
	if f.module == "" {
		return usagef("--module is required")
	}
	type found struct {
		fi      fs.FileInfo
		err     error
		target  string
		linkErr error
	}
	r, terr := touch("--module "+quote.Text(f.module), f.module, func() (r found) {
		r.fi, r.err = os.Stat(f.module)
		if errors.Is(r.err, fs.ErrNotExist) {
			r.target, r.linkErr = os.Readlink(f.module)
		}
		return r
	})
	if terr != nil {
		return terr
	}
	fi, err := r.fi, r.err
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if r.linkErr == nil {
			return usagef("--module %s: a symbolic link to %s, which leads to no file", quote.Text(f.module), quote.Text(r.target))
		}
		return usagef("--module %s: no such file", quote.Text(f.module))
	case errors.As(err, &pe):
		return usagef("--module %s: %v", quote.Text(f.module), pe.Err)
	case err != nil:
		return usagef("--module %s: %v", quote.Text(f.module), err)
	case fi.IsDir():
		return usagef("--module %s: a directory, not the module file", quote.Text(f.module))
	case !fi.Mode().IsRegular():
		return usagef("--module %s: %s, not the module file", quote.Text(f.module), "a "+fsread.TypeName(fi.Mode()))
	}
	return nil
}

// inspect reads the checkout of the module, as gitread.Inspect does,
// within readTimeout.
func (f *guardFlags) inspect() (gitread.Checkout, error) {
	type read struct {
		ck  gitread.Checkout
		err error
	}
	r, terr := touch("the checkout of --module "+quote.Text(f.module), f.abs(f.module), func() (r read) {
		r.ck, r.err = gitread.Inspect(f.abs(f.module))
		return r
	})
	if terr != nil {
		return gitread.Checkout{}, terr
	}
	return r.ck, r.err
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
	"Options.ExpectRevision": "--expect", "Options.Check": "--check",
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
	opts := runtimeguard.Options{ModulePath: f.abs(f.module), HomeDir: f.abs(f.home), Python: f.abs(f.python), Layout: layout, Logger: discard}
	if home := f.homeGiven(); f.home == "" && isRelative(home) && f.cwd != "" {
		opts.HomeDir = f.abs(home) // the variable's, anchored
	}
	return opts
}

// discard is the guards' logger: a command's own lines say what the
// library would log (a stale runtime, a reload, an install identified
// without Git), so no line of the library's comes between them.
var discard = slog.New(slog.DiscardHandler)
