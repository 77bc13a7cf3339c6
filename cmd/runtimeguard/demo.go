package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/demorepo"
)

// cmdDemo tells the whole story on a throwaway checkout, made with go-git so
// that it needs no git binary.
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

	g, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: home})
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
	say("6. update state: %s (no update marker in %s, no recovery marker)", g.Observe().State, home)

	incomplete := runtimeguard.HermesLayout.RecoveryMarkers[0]
	if err := os.WriteFile(filepath.Join(agent, incomplete), nil, 0o644); err != nil {
		return err
	}
	say("7. the updater left %s behind: update state %s", incomplete, g.Observe().State)
	say("8. nothing was restarted: the operator restarts the server, which then binds to %s", short(moved))
	if *keep {
		say("the checkout is kept at %s", agent)
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
	return "error: " + err.Error()
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
