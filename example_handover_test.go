package runtimeguard_test

import (
	"context"
	"log"
	"net"
	"net/http"

	"github.com/runtimeguard/runtimeguard"
)

// A server that reloads by re-executing itself: the new image takes the
// listening socket and the plan's revision, and binds only to that
// revision. (Compiled, not run: it listens until it is stopped.)
func ExampleExecHandover() {
	ctx := context.Background()
	inherited, err := runtimeguard.Inherit() // nil unless a handover started this image
	if err != nil {
		log.Fatal(err)
	}
	opts := runtimeguard.Options{ModulePath: "/srv/agent/run_agent.py"}
	var ln net.Listener
	if inherited != nil {
		ln = inherited.Listeners[0]
		opts.ExpectRevision, opts.ExpectReceipt = inherited.ExpectRevision, inherited.ExpectReceipt
	} else if ln, err = net.Listen("tcp", "localhost:8080"); err != nil {
		log.Fatal(err)
	}
	guard, err := runtimeguard.New(opts) // fails if the checkout is not at the planned revision
	inherited.Release()
	if err != nil {
		log.Fatal(err) // or answer the 409 until restarted, as examples/agentserver does
	}

	api := http.NewServeMux() // the handlers that touch session state
	var hs *http.Server
	served := make(chan struct{})
	serve := func(l net.Listener) {
		hs = &http.Server{Handler: api}
		go func() { _ = hs.Serve(l); served <- struct{}{} }()
	}
	handover := &runtimeguard.ExecHandover{
		Listeners: []net.Listener{ln},
		Quiesce: func(ctx context.Context) error {
			return hs.Shutdown(ctx) // closes the listener; the socket stays open for the new image
		},
		Resume: func(lns []net.Listener) error {
			<-served
			serve(lns[0])
			return nil
		},
	}
	rl, err := runtimeguard.NewReloader(ctx, guard, runtimeguard.ReloaderOptions{Handover: handover.Handover})
	if err != nil {
		log.Fatal(err)
	}
	api.Handle("/api/", rl.Wrap(http.NotFoundHandler()))
	serve(ln)
	<-rl.Done()
}
