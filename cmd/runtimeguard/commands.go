package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/quote"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// status is the JSON of 'runtimeguard status --json': the checkout as a
// full read finds it, then the updater's files. Its keys are stable API,
// snake_case like the guard's own JSON.
type status struct {
	ModulePath   string `json:"module_path"`
	SourceDir    string `json:"source_dir"`
	TopLevel     string `json:"top_level"`
	GitDir       string `json:"git_dir"`
	CommonDir    string `json:"common_dir"`
	ObjectFormat string `json:"object_format"`
	Tracked      bool   `json:"tracked"`
	HeadRef      string `json:"head_ref"`
	Revision     string `json:"revision"`
	Reason       string `json:"reason,omitempty"`
	ReadError    string `json:"read_error,omitempty"`
	// Build is the build the stamp of an install without Git names, as a
	// guard bound to it identifies it (see Observation.IdentifiedBy).
	Build string `json:"build,omitempty"`
	// BindError is why a guard could not bind to the module (left out
	// where one did).
	BindError string `json:"bind_error,omitempty"`
	runtimeguard.Observation
}

// statusError is the JSON of 'runtimeguard status --json' when there is no
// status to print: the module as given and why.
type statusError struct {
	ModulePath string `json:"module_path"`
	Error      string `json:"error"`
}

func cmdStatus(args []string, stdout, stderr io.Writer) error {
	c := newCommand("status", "status --module FILE [--json] [flags]", stdout, stderr)
	c.doc = `Exits 0 once it printed what it found, 1 when the checkout cannot be read
(after all it could read), 2 on a usage error, 7 when a file system did
not answer within 5s (a guard could not bind: the guard line says why,
after all it could read). The updater's files are reported as found: an
unknown marker or an unusable receipt is no error.
`
	var gf guardFlags
	gf.register(c.fs)
	asJSON := c.fs.Bool("json", false, "print JSON (its fields: the command's documentation), on error too")
	if err := c.parse(args, 0); err != nil {
		return err
	}
	printed := false
	err := status1(&gf, *asJSON, stdout, &printed)
	var code exitCode
	if err != nil && *asJSON && !printed && !errors.As(err, &code) {
		if enc := json.NewEncoder(stdout); enc.Encode(statusError{ModulePath: gf.module, Error: err.Error()}) != nil {
			return err
		}
	}
	return err
}

// status1 prints the status the flags ask for; printed says whether it
// printed anything.
func status1(gf *guardFlags, asJSON bool, stdout io.Writer, printed *bool) error {
	if _, err := gf.resolve(); err != nil {
		return err
	}
	if err := gf.checkModule(); err != nil {
		return err
	}
	ck, readErr := gf.inspect()
	if ck.ModulePath == "" && readErr != nil {
		return readErr // the module path itself is unusable, or did not answer
	}
	// A guard bound to the module says which check path it takes; where
	// none can be bound, the updater's files are observed all the same.
	var o runtimeguard.Observation
	build := ""
	g, bindErr := runtimeguard.New(gf.options())
	if bindErr == nil {
		if err := g.EnsureCurrent(); err == nil && g.Observe().Check == "watch" {
			_ = g.EnsureCurrent() // a first read of fresh files is read once more
		}
		o = g.Observe()
		if o.IdentifiedBy != "git" {
			build = g.Identity().Revision
		}
	} else {
		var err error
		if o, err = runtimeguard.Observe(gf.options()); err != nil {
			return apiError(err)
		}
	}
	s := status{
		ModulePath: ck.ModulePath, SourceDir: ck.SourceDir, TopLevel: ck.TopLevel,
		GitDir: ck.GitDir, CommonDir: ck.CommonDir, ObjectFormat: ck.ObjectFormat,
		Tracked: ck.Tracked, HeadRef: ck.Head, Revision: ck.Revision, Reason: ck.Reason,
		Build: build, Observation: o,
	}
	if readErr != nil {
		s.ReadError = readErr.Error()
	}
	if bindErr != nil {
		s.BindError = bindErr.Error()
	}
	if readErr == nil && errors.Is(bindErr, runtimeguard.ErrReadTimeout) {
		// Printed all it could; the exit status says what it gave up on.
		readErr = exitCode(exitTimeout)
	}
	*printed = true
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			return err
		}
		return readErr
	}
	said := false // the revision's row says why no guard binds
	row := func(k, v string) { fmt.Fprintf(stdout, "%-18s %s\n", k+":", quote.Text(v)) }
	row("module", s.ModulePath)
	row("source dir", s.SourceDir)
	row("worktree", orNone(s.TopLevel))
	if s.TopLevel != "" {
		row("git dir", s.GitDir)
		row("object format", s.ObjectFormat)
		if s.ReadError != "" && !s.Tracked && s.Reason == "" {
			row("tracked", "unknown: the index was not read")
		} else {
			row("tracked", fmt.Sprint(s.Tracked))
		}
		switch {
		case s.HeadRef != "":
			row("HEAD", s.HeadRef)
		case s.ReadError != "":
			row("HEAD", "unreadable")
		default:
			row("HEAD", "detached")
		}
	}
	switch {
	case s.ReadError != "":
		row("revision", "unreadable: "+s.ReadError)
	case s.Revision == "" && bindErr != nil:
		// Such as HEAD naming a branch that is gone while others exist.
		row("revision", "none: "+s.Reason+" (a guard does not bind here: "+strings.TrimPrefix(bindErr.Error(), "runtimeguard: ")+")")
		said = true
	case s.Revision == "":
		row("revision", "none: "+s.Reason)
	default:
		row("revision", s.Revision)
	}
	switch s.IdentifiedBy {
	case "":
	case "build stamp":
		row("identified by", "build stamp, build "+s.Build)
	default:
		row("identified by", s.IdentifiedBy)
	}
	if bindErr != nil && !said {
		// In place of the check path and how it is identified, which
		// only a guard bound here tells.
		row("guard", "not bound: "+strings.TrimPrefix(bindErr.Error(), "runtimeguard: "))
	}
	row("update marker", fmt.Sprintf("%s: %s (%s)", s.Marker, s.MarkerReason, orNone(s.MarkerPath)))
	row("update state", string(s.State))
	if s.Check != "" {
		check := s.Check
		if s.CheckReason != "" {
			check += " (" + s.CheckReason + ")"
		}
		row("check path", check)
	}
	for _, r := range s.InstallRoots {
		row("install root", r)
	}
	for _, m := range s.RecoveryMarkers {
		row("recovery marker", m)
	}
	if s.RecoveryProblem != "" {
		row("recovery markers", "cannot all be looked for: "+s.RecoveryProblem)
	}
	switch {
	case s.Receipt != nil:
		r := s.Receipt
		row("receipt", fmt.Sprintf("%s %s, finished %s, %s -> %s (%s)", r.ID, r.Outcome,
			orNone(formatTime(r.FinishedAt)), orNone(r.From), orNone(r.To), s.ReceiptPath))
	case s.ReceiptProblem != "":
		row("receipt", "unusable: "+s.ReceiptProblem+" ("+s.ReceiptPath+")")
	case s.ReceiptPath != "":
		row("receipt", "none ("+s.ReceiptPath+")")
	}
	return readErr // printed as a revision too; the exit status says it
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func cmdCheck(args []string, stdout, stderr io.Writer) error {
	c := newCommand("check", "check --module FILE --expect REV [flags]", stdout, stderr)
	c.doc = `Exits 0 when current (the revision on standard output), 3 when stale (the
409 body on standard output, why on standard error), 1 when the checkout
cannot be read or the module is in no tracked Git checkout, 2 on a usage
error, 7 when a file system did not answer within 5s.
`
	var gf guardFlags
	gf.register(c.fs)
	expect := c.fs.String("expect", "", "the full `REV`ision the server loaded (required)")
	repeat := c.fs.Int("repeat", 1, "run the check `N` times, as a busy server would (for measuring)")
	check := c.fs.String("check", "", "how a check proves the checkout unchanged, a `MODE`: watch (the default, where the platform can), stat or read")
	if err := c.parse(args, 0); err != nil {
		return err
	}
	switch {
	case gf.module == "" || *expect == "":
		return usagef("--module and --expect are required")
	case *repeat < 1:
		return usagef("--repeat must be at least 1: a check is what this command is for")
	}
	if err := gf.checkHome(); err != nil {
		return err
	}
	opts := gf.options()
	opts.ExpectRevision, opts.Check = *expect, *check
	if _, err := resolveFlags(opts); err != nil {
		return err
	}
	if err := gf.checkModule(); err != nil {
		return err
	}
	g, err := runtimeguard.New(opts)
	if err != nil {
		return optionUsage(err)
	}
	for i := 0; i < *repeat; i++ {
		if err := g.EnsureCurrent(); err != nil {
			return printStale(stdout, stderr, err)
		}
	}
	fmt.Fprintln(stdout, g.Identity().Revision)
	return nil
}

// printStale prints the 409 body of a stale check on standard output and
// why on standard error.
func printStale(stdout, stderr io.Writer, err error) error {
	var se *runtimeguard.StaleError
	if !errors.As(err, &se) {
		return err
	}
	body, jerr := json.Marshal(se.Payload())
	if jerr != nil {
		return jerr
	}
	fmt.Fprintf(stdout, "%s\n", body)
	now := "at " + se.Current
	switch {
	case se.Current == "" && se.Err != nil:
		now = "unusable: " + se.Err.Error()
	case se.Current == "":
		now = "at no revision"
	}
	fmt.Fprintf(stderr, "runtimeguard check: stale: loaded %s, the checkout is now %s\n", se.Captured, quote.Text(now))
	return exitCode(exitStale)
}

// markerJSON is the JSON of 'runtimeguard marker --json'.
type markerJSON struct {
	Path   string `json:"path"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

func cmdMarker(args []string, stdout, stderr io.Writer) error {
	c := newCommand("marker", "marker [--json] [--max-age DURATION] PATH", stdout, stderr)
	c.doc = "Exits by the marker's state: 0 absent, 4 active, 5 stale, 6 unknown (also\nwhen its file system does not answer within " + readTimeout.String() + ").\n"
	asJSON := c.fs.Bool("json", false, `print {"path", "state", "reason"}`)
	maxAge := c.fs.Duration("max-age", runtimeguard.DefaultMaxMarkerAge, "the age, a `DURATION`, past which a marker is stale")
	if err := c.parse(args, 1); err != nil {
		return err
	}
	if *maxAge <= 0 {
		return usagef("--max-age must be positive")
	}
	path := c.args[0]
	if path == "" {
		return usagef("the marker PATH is empty")
	}
	// A marker that cannot be read within readTimeout is unknown, as a
	// guard's diagnostic says it.
	v, err := touch("the marker "+quote.Text(path), path, func() updater.Verdict {
		return updater.System.Judge(*maxAge).Read(path)
	})
	if err != nil {
		v = updater.Verdict{Life: updater.Unsure, Reason: err.Error()}
	}
	state, reason := stateOf(v.Life), v.Reason
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(markerJSON{Path: path, State: string(state), Reason: reason}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%s: %s\n", state, quote.Text(reason))
	}
	switch state {
	case runtimeguard.MarkerAbsent:
		return nil
	case runtimeguard.MarkerActive:
		return exitCode(exitMarkerActive)
	case runtimeguard.MarkerAbandoned:
		return exitCode(exitMarkerStale)
	}
	return exitCode(exitMarkerUnknown)
}

// minInterval is the shortest --interval of watch: where no events are
// watched it checks the checkout and reads the updater's files that
// often.
const minInterval = time.Millisecond

// watchEvent is a line of 'runtimeguard watch --json'.
type watchEvent struct {
	Time         string `json:"time"`
	Event        string `json:"event"` // bound, current, stale, update_state, stopped
	SourceDir    string `json:"source_dir,omitempty"`
	IdentifiedBy string `json:"identified_by,omitempty"` // git, build stamp or file
	Revision     string `json:"revision,omitempty"`
	Current      string `json:"current,omitempty"` // the revision the checkout moved to; "" when unreadable
	UpdateState  string `json:"update_state,omitempty"`
}

func cmdWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newCommand("watch", "watch --module FILE [--json] [--interval DURATION] [flags]", stdout, stderr)
	c.doc = `Prints a line when the guard binds, once it has checked, and at each
change after that, once: the checkout moved (the kernel's events where it
has them, else a check every --interval), came back to the revision
bound (current), moved elsewhere, or the update state changed (checked
every --interval once the checkout first moved). A module in no tracked
Git checkout is watched by its file and its build stamp. Exits 0 once
stopped by SIGINT or SIGTERM, 1 when it cannot watch, 2 on a usage error,
7 when a file system did not answer within 5s.
`
	var gf guardFlags
	gf.register(c.fs)
	asJSON := c.fs.Bool("json", false, "print a JSON object a line")
	interval := c.fs.Duration("interval", time.Second, "how often to check where no events are watched, a `DURATION` of at least 1ms such as 500ms")
	if err := c.parse(args, 0); err != nil {
		return err
	}
	if _, err := gf.resolve(); err != nil {
		return err
	}
	if gf.module == "" {
		return usagef("--module is required")
	}
	if *interval < minInterval {
		return usagef("--interval must be at least %v: a shorter one only spends a processor on checks", minInterval)
	}
	if err := gf.checkModule(); err != nil {
		return err
	}
	g, err := runtimeguard.New(gf.options())
	if err != nil {
		return optionUsage(err)
	}
	id := g.Identity()
	emit := func(e watchEvent) {
		e.Time = time.Now().UTC().Format(time.RFC3339)
		if *asJSON {
			_ = json.NewEncoder(stdout).Encode(e)
			return
		}
		line := e.Event
		switch e.Event {
		case "bound":
			line += " " + quote.Text(e.SourceDir) + " at " + orNone(e.Revision)
			if e.IdentifiedBy != "git" {
				line += " (no Git checkout: identified by its " + e.IdentifiedBy + ")"
			}
		case "current":
			line += " " + orNone(e.Revision)
		case "stale":
			line += " " + orNone(e.Current) + " update_state=" + e.UpdateState
			if e.Current == "" {
				line = "stale unreadable update_state=" + e.UpdateState
			}
		case "update_state":
			line = "stale update_state=" + e.UpdateState
		}
		fmt.Fprintf(stdout, "%s %s\n", e.Time, line)
	}
	emit(watchEvent{Event: "bound", SourceDir: id.SourceDir, IdentifiedBy: g.Observe().IdentifiedBy, Revision: id.Revision})
	stopped := func() error {
		emit(watchEvent{Event: "stopped"})
		return nil
	}

	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Watch(watchCtx, *interval) }()
	// Until the checkout first moves, the guard's Watch says when (the
	// kernel's events where it has them); from then on, Changed having
	// fired for good, a check every interval finds the next change:
	// current again, moved again, the update state.
	changed := g.Changed()
	var tick <-chan time.Time
	said := "" // the last line's change: "current", or the stale revision
	state := runtimeguard.UpdateState("")
	for {
		var se *runtimeguard.StaleError
		switch err := g.EnsureCurrent(); {
		case errors.As(err, &se):
			switch now := "stale " + se.Current; {
			case said != now:
				said, state = now, se.State
				emit(watchEvent{Event: "stale", Revision: id.Revision, Current: se.Current, UpdateState: string(state)})
			case se.State != state:
				state = se.State
				emit(watchEvent{Event: "update_state", UpdateState: string(state)})
			}
		case err != nil:
			return err
		case said != "current":
			said = "current"
			emit(watchEvent{Event: "current", Revision: id.Revision})
		}
		select {
		case <-ctx.Done():
			cancel()
			<-done
			return stopped()
		case err := <-done:
			if ctx.Err() != nil {
				return stopped() // ctx ended Watch too, and select picked its end
			}
			return err // Watch ended before ctx: it could not watch
		case <-changed:
			changed = nil
			ticker := time.NewTicker(*interval)
			defer ticker.Stop()
			tick = ticker.C
		case <-tick:
		}
	}
}

func cmdVersion(args []string, stdout, stderr io.Writer) error {
	c := newCommand("version", "version", stdout, stderr)
	if err := c.parse(args, 0); err != nil {
		return err
	}
	version, revision := "(unknown)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = " " + s.Value
			}
		}
	}
	fmt.Fprintf(stdout, "runtimeguard %s%s %s %s/%s\n", version, revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
