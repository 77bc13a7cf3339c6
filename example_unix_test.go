//go:build unix

package runtimeguard_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/runtimeguard/runtimeguard"
)

// A server that loads its module through git-sync's link reloads once
// git-sync flips the link to a new revision's worktree: the flip is the
// proof, with no receipt. publish stands for git-sync (elided: see
// below).
func ExampleGitSyncLayout() {
	root := tempDir() // git-sync's --root; its --link is agent
	defer os.RemoveAll(root)
	link := filepath.Join(root, "agent")
	publish(root, link, "class AIAgent: pass\n")
	guard, err := runtimeguard.New(runtimeguard.Options{
		ModulePath: filepath.Join(link, "run_agent.py"),
		Layout:     runtimeguard.GitSyncLayout(link),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer guard.Close()
	_, err = guard.PlanReload(context.Background())
	fmt.Println("before a flip:", errors.Is(err, runtimeguard.ErrNotReady))

	to := publish(root, link, "class AIAgent: revision = 2\n") // git-sync flips the link
	fmt.Println("stale:", errors.Is(guard.EnsureCurrent(), runtimeguard.ErrStale))
	plan, err := guard.PlanReload(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	// … schedule, drain, restart the workers …
	if err := plan.Bind(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("reloaded:", guard.Identity().Revision == to, guard.EnsureCurrent())
	// Output:
	// before a flip: true
	// stale: true
	// reloaded: true <nil>
}

// publish does what git-sync does with a new revision: a complete
// checkout at <root>/.worktrees/<revision> (here a repository of its own
// with one commit), then a link tmp-link to it renamed over link. It
// returns the revision.
func publish(root, link, content string) string {
	staging := filepath.Join(root, ".worktrees", "staging")
	module := filepath.Join(staging, "run_agent.py")
	update(module, content)
	rev := headOf(module)
	if err := os.Rename(staging, filepath.Join(root, ".worktrees", rev)); err != nil {
		log.Fatal(err)
	}
	tmp := filepath.Join(root, "tmp-link")
	if err := os.Symlink(filepath.Join(".worktrees", rev), tmp); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		log.Fatal(err)
	}
	return rev
}

// The paths a guard's options resolve to, with the defaults applied, as a
// tool that writes the updater's files needs them.
// A guard made without a module reads nothing.
func ExampleGuard_Paths() {
	g, err := runtimeguard.New(runtimeguard.Options{
		HomeDir: "/srv/hermes",
		Python:  "/srv/hermes/hermes-agent/venv/bin/python",
	})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	p := g.Paths()
	fmt.Println(p.Marker)
	fmt.Println(p.Receipt)
	fmt.Println(p.InstallRoot)
	// Output:
	// /srv/hermes/.hermes-update-in-progress
	// /srv/hermes/logs/update_receipts/latest.json
	// /srv/hermes/hermes-agent
}
