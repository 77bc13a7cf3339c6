package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/demorepo"
	"github.com/runtimeguard/runtimeguard/internal/quote"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// cmdDemo tells the whole story on a throwaway checkout, written with the
// standard library (internal/demorepo) so that it needs no git binary.
func cmdDemo(args []string, stdout, stderr io.Writer) error {
	c := newCommand("demo", "demo [--keep]", stdout, stderr)
	keep := c.fs.Bool("keep", false, "keep the throwaway checkout and print where it is")
	if err := c.parse(args, 0); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "runtimeguard-demo-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(tmp)
	}
	agent, home := filepath.Join(tmp, "hermes-agent"), filepath.Join(tmp, "hermes-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	module := filepath.Join(agent, "run_agent.py")
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }

	repo, err := demorepo.Open(agent)
	if err != nil {
		return err
	}
	loaded, err := repo.Commit("run_agent.py", "class AIAgent:\n    revision = 'loaded'\n", "agent as loaded")
	if err != nil {
		return err
	}
	say("1. made a checkout with run_agent.py at commit %s", short(loaded))

	g, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: home, Logger: discard})
	if err != nil {
		return err
	}
	say("2. the server loads run_agent.py and binds a guard to revision %s", short(g.Identity().Revision))
	say("3. check before touching session state: %s", verdict(g.EnsureCurrent()))

	moved, err := repo.Commit("run_agent.py", "class AIAgent:\n    revision = 'updated'\n", "agent update")
	if err != nil {
		return err
	}
	say("4. an updater commits while the server runs: HEAD is now %s", short(moved))

	err = g.EnsureCurrent()
	var se *runtimeguard.StaleError
	if !errors.As(err, &se) {
		return fmt.Errorf("the check after the update passed: %v", err)
	}
	say("5. check: %s; the server answers HTTP %d with:", verdict(err), se.StatusCode())
	body, err := json.MarshalIndent(se.Payload(), "   ", "  ")
	if err != nil {
		return err
	}
	say("   %s", body)
	say("6. update state: %s (no update marker in %s, no recovery marker)", g.Observe().State, quote.Text(home))

	incomplete := runtimeguard.HermesLayout.RecoveryMarkers[0]
	if err := os.WriteFile(filepath.Join(agent, incomplete), nil, 0o644); err != nil {
		return err
	}
	say("7. the updater left %s behind: update state %s", incomplete, g.Observe().State)
	say("8. an incomplete update proves nothing: the server answers 409 until an operator restarts it")

	// A second run: the updater writes its success receipt, and the guard
	// proves a reload safe.
	if err := os.Remove(filepath.Join(agent, incomplete)); err != nil {
		return err
	}
	_, perr := g.PlanReload(context.Background())
	say("9. the install is repaired, but without a receipt no reload is planned:\n   %s", quote.Text(fmt.Sprint(perr)))
	top, err := filepath.EvalSymlinks(agent)
	if err != nil {
		return err
	}
	r := updater.Receipt{
		UpdateID: updater.NewUpdateID(), Outcome: updater.OutcomeSuccess,
		StartedAt: time.Now().UTC(), FinishedAt: time.Now().UTC(),
		From: loaded, To: moved, Checkout: top, // as runtimeguard update names its checkout
	}
	if r.CheckoutID, err = updater.CheckoutID(top); err != nil {
		return err
	}
	receipt := filepath.Join(home, filepath.FromSlash(runtimeguard.HermesLayout.Receipt))
	if err := updater.WriteReceipt(home, receipt, r, os.Getpid()); err != nil {
		return err
	}
	say("10. the updater writes its receipt: outcome %s, %s -> %s", r.Outcome, short(loaded), short(moved))
	plan, err := g.PlanReload(context.Background())
	if err != nil {
		return err
	}
	if err := plan.Schedule(); err != nil {
		return err
	}
	err = g.EnsureCurrent()
	if errors.As(err, &se) {
		say("11. the guard proves a reload safe; while the server reloads, the 409 says restart_scheduled: %v", se.Payload().RestartScheduled)
	}
	if err := plan.Bind(context.Background()); err != nil {
		return err
	}
	say("12. the server restarts its workers and rebinds: revision %s, check: %s", short(g.Identity().Revision), verdict(g.EnsureCurrent()))
	if *keep {
		say("the checkout is kept at %s", quote.Text(agent))
	}
	return nil
}

func verdict(err error) string {
	switch {
	case err == nil:
		return "current"
	case errors.Is(err, runtimeguard.ErrStale):
		return "stale"
	}
	return "error: " + quote.Text(err.Error())
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
