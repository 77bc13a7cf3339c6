package runtimeguard_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/runtimeguard/runtimeguard"
)

// A whole server: bind at startup to the file the server loaded its agent
// from, and put the guard in front of every handler that touches session
// state. The README's first screen is this function's body, in a main
// package. (Compiled, not run: it listens until it is stopped.)
func Example_server() {
	// Bind, at startup, to the file this server loaded its agent from.
	guard, err := runtimeguard.New(runtimeguard.Options{ModulePath: "/srv/agent/run_agent.py"})
	if err != nil {
		log.Fatal(err) // no such file, or a checkout it cannot read
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok") // only while the checkout is where it was: session state is safe
	})
	// Once the checkout moved, a retryable 409 before any handler runs.
	log.Fatal(http.ListenAndServe("localhost:8080", guard.Middleware(mux)))
}

// A server that reloads by itself once the updater's receipt proves the
// update finished. (Compiled, not run: it listens until it is stopped.)
func Example_reloader() {
	ctx := context.Background()
	guard, err := runtimeguard.New(runtimeguard.Options{ModulePath: "/srv/agent/run_agent.py"})
	if err != nil {
		log.Fatal(err)
	}
	api := http.NewServeMux() // the handlers that touch session state

	rl, err := runtimeguard.NewReloader(ctx, guard, runtimeguard.ReloaderOptions{
		Restart: func(ctx context.Context, plan *runtimeguard.Plan) error {
			return nil // stop the workers, start them on the new code; the guard is then rebound
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/api/", rl.Wrap(api)) // guarded, drained while it reloads
	log.Fatal(http.ListenAndServe("localhost:8080", nil))
}
