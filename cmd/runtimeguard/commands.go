package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
)

// status is the JSON of 'runtimeguard status --json'. Its field names are
// stable API.
type status struct {
	ModulePath      string   `json:"module_path"`
	SourceDir       string   `json:"source_dir"`
	TopLevel        string   `json:"top_level"`
	GitDir          string   `json:"git_dir"`
	CommonDir       string   `json:"common_dir"`
	ObjectFormat    string   `json:"object_format"`
	Tracked         bool     `json:"tracked"`
	HeadRef         string   `json:"head_ref"`
	Revision        string   `json:"revision"`
	Reason          string   `json:"reason,omitempty"`
	ReadError       string   `json:"read_error,omitempty"`
	MarkerPath      string   `json:"marker_path"`
	UpdateMarker    string   `json:"update_marker"`
	UpdateState     string   `json:"update_state"`
	InstallRoots    []string `json:"install_roots"`
	RecoveryMarkers []string `json:"recovery_markers"`
}

func cmdStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", "status --module FILE [--home DIR] [--python PATH] [--json]", stderr)
	var gf guardFlags
	gf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON (see the README for its fields)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if gf.module == "" {
		return usagef("--module is required")
	}
	c, readErr := gitread.Inspect(gf.module)
	if c.ModulePath == "" && readErr != nil {
		return readErr // the module path itself is unusable
	}
	// An unbound guard observes the update state of the module's install.
	g, err := runtimeguard.New(runtimeguard.Options{HomeDir: gf.home, Python: gf.python})
	if err != nil {
		return err
	}
	o := g.ObserveAt(c.SourceDir)
	s := status{
		ModulePath: c.ModulePath, SourceDir: c.SourceDir, TopLevel: c.TopLevel,
		GitDir: c.GitDir, CommonDir: c.CommonDir, ObjectFormat: c.ObjectFormat,
		Tracked: c.Tracked, HeadRef: c.Head, Revision: c.Revision, Reason: c.Reason,
		MarkerPath: o.MarkerPath, UpdateMarker: string(o.Marker), UpdateState: string(o.State),
		InstallRoots: nonNil(o.InstallRoots), RecoveryMarkers: nonNil(o.RecoveryMarkers),
	}
	if readErr != nil {
		s.ReadError = readErr.Error()
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	row := func(k, v string) { fmt.Fprintf(stdout, "%-18s %s\n", k+":", v) }
	row("module", s.ModulePath)
	row("source dir", s.SourceDir)
	row("worktree", orNone(s.TopLevel))
	if s.TopLevel != "" {
		row("git dir", s.GitDir)
		row("object format", s.ObjectFormat)
		row("tracked", fmt.Sprint(s.Tracked))
		if s.HeadRef == "" {
			row("HEAD", "detached")
		} else {
			row("HEAD", s.HeadRef)
		}
	}
	switch {
	case s.ReadError != "":
		row("revision", "unreadable: "+s.ReadError)
	case s.Revision == "":
		row("revision", "none: "+s.Reason+" (a guard bound here is inert)")
	default:
		row("revision", s.Revision)
	}
	row("update marker", s.UpdateMarker+" ("+orNone(s.MarkerPath)+")")
	row("update state", s.UpdateState)
	for _, r := range s.InstallRoots {
		row("install root", r)
	}
	for _, m := range s.RecoveryMarkers {
		row("recovery marker", m)
	}
	return nil
}

func cmdCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("check", "check --module FILE --expect REV [--home DIR] [--python PATH]", stderr)
	var gf guardFlags
	gf.register(fs)
	expect := fs.String("expect", "", "the full `REV`ision the server loaded (required)")
	repeat := fs.Int("repeat", 1, "run the check `N` times, as a busy server would (for measuring)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if gf.module == "" || *expect == "" {
		return usagef("--module and --expect are required")
	}
	if *repeat < 0 {
		return usagef("--repeat must not be negative")
	}
	g, err := runtimeguard.New(runtimeguard.Options{ModulePath: gf.module, HomeDir: gf.home, Python: gf.python, ExpectRevision: *expect})
	if err != nil {
		if errors.Is(err, runtimeguard.ErrStale) {
			return printStale(stdout, err)
		}
		return err
	}
	for i := 0; i < *repeat; i++ {
		if err := g.EnsureCurrent(); err != nil {
			return printStale(stdout, err)
		}
	}
	fmt.Fprintln(stdout, g.Identity().Revision)
	return nil
}

func printStale(stdout io.Writer, err error) error {
	var se *runtimeguard.StaleError
	if !errors.As(err, &se) {
		return err
	}
	body, jerr := json.Marshal(se.Payload())
	if jerr != nil {
		return jerr
	}
	fmt.Fprintf(stdout, "%s\n", body)
	return exitCode(exitStale)
}

func cmdMarker(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("marker", "marker PATH", stderr)
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	fmt.Fprintln(stdout, runtimeguard.ReadUpdateMarker(fs.Arg(0)))
	return nil
}

func cmdWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("watch", "watch --module FILE [--home DIR] [--python PATH] [--interval D]", stderr)
	var gf guardFlags
	gf.register(fs)
	interval := fs.Duration("interval", time.Second, "how often to check")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if gf.module == "" {
		return usagef("--module is required")
	}
	if *interval <= 0 {
		return usagef("--interval must be positive")
	}
	g, err := runtimeguard.New(runtimeguard.Options{ModulePath: gf.module, HomeDir: gf.home, Python: gf.python})
	if err != nil {
		return err
	}
	id := g.Identity()
	stamp := func() string { return time.Now().UTC().Format(time.RFC3339) }
	if id.Revision == "" {
		fmt.Fprintf(stdout, "%s inert %s is not in a tracked Git checkout: every check passes\n", stamp(), id.ModulePath)
	} else {
		fmt.Fprintf(stdout, "%s bound %s at %s\n", stamp(), id.SourceDir, id.Revision)
	}
	last := ""
	ticker := time.NewTicker(*interval)
	defer ticker.Stop()
	for {
		line := "current " + id.Revision
		var se *runtimeguard.StaleError
		if err := g.EnsureCurrent(); errors.As(err, &se) {
			now := se.Current
			if now == "" {
				now = "unreadable"
			}
			line = fmt.Sprintf("stale %s update_state=%s", now, se.State)
		}
		if line != last && id.Revision != "" {
			fmt.Fprintf(stdout, "%s %s\n", stamp(), line)
			last = line
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "%s stopped\n", stamp())
			return nil
		case <-ticker.C:
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
