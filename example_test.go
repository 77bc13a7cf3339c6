package runtimeguard_test

import (
	"context"
	"errors"
	"expvar"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/demorepo"
)

// The examples elide what a server has already: checkout stands for the
// Git checkout the server loaded its module from, update for the updater
// that commits to it while the server runs, tempDir for the updater's home
// directory, headOf for the revision the updater moved to. They are defined
// below and are not part of the package: checkout and update write a real
// Git repository with the standard library (internal/demorepo), so the
// examples need no git binary and no Git configuration of the user's.

// checkout makes a Git checkout that tracks run_agent.py and returns the
// module's path.
func checkout() string {
	dir, err := os.MkdirTemp("", "runtimeguard-example-")
	if err != nil {
		log.Fatal(err)
	}
	module := filepath.Join(dir, "run_agent.py")
	update(module, "class AIAgent: pass\n")
	return module
}

// tempDir makes a directory for an example.
func tempDir() string {
	dir, err := os.MkdirTemp("", "runtimeguard-example-")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// update writes content to the module and commits it, as an updater would.
func update(module, content string) {
	repo, err := demorepo.Open(filepath.Dir(module))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := repo.Commit(filepath.Base(module), content, "update"); err != nil {
		log.Fatal(err)
	}
}

// A server binds to the module it loaded, checks before touching session
// state, and answers 409 once the checkout moved.
func Example() {
	module := checkout() // your checkout: the path of the module the server loaded
	defer os.RemoveAll(filepath.Dir(module))
	home := tempDir() // your updater's home directory
	defer os.RemoveAll(home)

	guard, err := runtimeguard.New(runtimeguard.Options{
		ModulePath: module, // the file the server loaded
		HomeDir:    home,   // where the updater keeps its marker and receipts
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("before the update:", guard.EnsureCurrent())

	// An updater moves the checkout while the server runs (update commits
	// a change, as git pull would).
	update(module, "class AIAgent: revision = 2\n")

	err = guard.EnsureCurrent()
	fmt.Println("after the update, stale:", errors.Is(err, runtimeguard.ErrStale))

	rec := httptest.NewRecorder()
	runtimeguard.WriteStale(rec, err)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Print(rec.Body.String())
	// Output:
	// before the update: <nil>
	// after the update, stale: true
	// 409 application/json
	// {"error":"Hermes Agent was updated on disk after Hermes WebUI loaded it. Restart Hermes WebUI manually to load the new code.","type":"agent_runtime_stale","retryable":true,"restart_scheduled":false,"agent_update_state":"unverified"}
}

// The middleware answers 409 before the handler runs, so a stale runtime
// never reaches session state.
func ExampleGuard_Middleware() {
	module := checkout() // your Git checkout (elided: see the top of the file)
	defer os.RemoveAll(filepath.Dir(module))
	guard, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: filepath.Dir(module), Message: "restart required"})
	if err != nil {
		log.Fatal(err)
	}
	sessions := 0
	handler := guard.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sessions++
		fmt.Fprintln(w, "session started")
	}))

	serve := func() {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("POST", "/api/chat/start", nil))
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	serve()
	update(module, "class AIAgent: revision = 2\n") // the updater commits
	serve()
	fmt.Println("sessions started:", sessions)
	// Output:
	// 200 session started
	// 409 {"error":"restart required","type":"agent_runtime_stale","retryable":true,"restart_scheduled":false,"agent_update_state":"unverified"}
	// sessions started: 1
}

// A server whose updater is not Hermes describes its layout: where its home
// directory is, the marker it keeps while it runs, the markers an
// interrupted update leaves behind.
func ExampleLayout() {
	module := checkout() // your Git checkout (elided: see the top of the file)
	defer os.RemoveAll(filepath.Dir(module))
	home := filepath.Join(filepath.Dir(module), "state")
	if err := os.Mkdir(home, 0o755); err != nil {
		log.Fatal(err)
	}
	guard, err := runtimeguard.New(runtimeguard.Options{
		ModulePath: module,
		HomeDir:    home,
		Layout: runtimeguard.Layout{
			HomeEnv:         "PLUGINHOST_HOME",
			Marker:          "deploy.lock.pid",
			RecoveryMarkers: []string{".deploy-failed"},
			Receipt:         "deploys/last.json",
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(guard.Observe().State)

	// The deploy tool writes its process ID and the time it started.
	body := fmt.Sprintf("%d\n%d\n", os.Getpid(), time.Now().Unix())
	if err := os.WriteFile(filepath.Join(home, "deploy.lock.pid"), []byte(body), 0o644); err != nil {
		log.Fatal(err)
	}
	o := guard.Observe()
	fmt.Println(o.State, filepath.Base(o.MarkerPath), o.Marker)
	// Output:
	// unverified
	// active deploy.lock.pid active
}

// A handler that checks by hand answers with the body the request prefers.
func ExampleGuard_WriteStale() {
	module := checkout() // your Git checkout (elided: see the top of the file)
	defer os.RemoveAll(filepath.Dir(module))
	guard, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: filepath.Dir(module), ProblemDetails: true})
	if err != nil {
		log.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := guard.EnsureCurrent(); guard.WriteStale(w, r, err) {
			return
		}
		fmt.Fprintln(w, "session started")
	})
	update(module, "class AIAgent: revision = 2\n") // the updater commits
	for _, accept := range []string{"application/json", "application/problem+json"} {
		req := httptest.NewRequest("POST", "/api/chat/start", nil)
		req.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	}
	// Output:
	// 409 application/json
	// 409 application/problem+json
}

// A background job stores the payload and the status as its final state.
func ExampleStaleError_Payload() {
	err := error(&runtimeguard.StaleError{Message: "restart required", State: runtimeguard.UpdateIncomplete})
	var stale *runtimeguard.StaleError
	if errors.As(err, &stale) {
		job := map[string]any{"status": "error", "error_status": stale.StatusCode(), "payload": stale.Payload()}
		fmt.Printf("%d %s %v\n", job["error_status"], stale.Payload().AgentUpdateState, stale.Payload().RestartScheduled)
	}
	// Output:
	// 409 incomplete false
}

// A host that reloads by itself: a plan only where the updater's success
// receipt proves the update finished, then the reload, then the binding.
func ExampleGuard_PlanReload() {
	module := checkout() // your Git checkout (elided: see the top of the file)
	defer os.RemoveAll(filepath.Dir(module))
	home := tempDir()
	defer os.RemoveAll(home)
	guard, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: home})
	if err != nil {
		log.Fatal(err)
	}
	from := guard.Identity().Revision
	update(module, "class AIAgent: revision = 2\n") // the updater commits
	_, err = guard.PlanReload(context.Background())
	fmt.Println("no receipt:", errors.Is(err, runtimeguard.ErrNotReady))

	// The updater writes its receipt (runtimeguard update does this for
	// any updater), naming the checkout it updated: its top-level
	// directory (git rev-parse --show-toplevel).
	to := headOf(module) // the revision the update moved to (git rev-parse HEAD)
	top, err := filepath.EvalSymlinks(filepath.Dir(module))
	if err != nil {
		log.Fatal(err)
	}
	receipt := fmt.Sprintf(`{"schema": 1, "update_id": "u1", "outcome": "success", "started_at": %q, "finished_at": %q, "pre_update": {"sha": %q}, "post_update": {"sha": %q}, "runtimeguard_checkout": %q}`,
		time.Now().UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano), from, to, top)
	path := filepath.Join(home, "logs", "update_receipts", "latest.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(receipt), 0o644); err != nil {
		log.Fatal(err)
	}

	plan, err := guard.PlanReload(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	if err := plan.Schedule(); err != nil { // the 409s now say restart_scheduled
		log.Fatal(err)
	}
	var stale *runtimeguard.StaleError
	if errors.As(guard.EnsureCurrent(), &stale) {
		fmt.Println("restart scheduled:", stale.Payload().RestartScheduled)
	}
	// … stop admitting guarded work, drain it, restart the workers …
	if err := plan.Bind(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("reloaded:", guard.Identity().Revision == to, guard.EnsureCurrent())
	// Output:
	// no receipt: true
	// restart scheduled: true
	// reloaded: true <nil>
}

// A host that wants to know the moment the checkout moved, without
// waiting for a request (to plan a reload, or show a banner), runs Watch
// and waits on Changed.
func ExampleGuard_Changed() {
	module := checkout() // your Git checkout (elided: see the top of the file)
	defer os.RemoveAll(filepath.Dir(module))
	home := tempDir()
	defer os.RemoveAll(home)
	guard, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: home})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go guard.Watch(ctx, 100*time.Millisecond) // events where the kernel has them; else every 100ms

	update(module, "class AIAgent: revision = 2\n") // the updater commits
	select {
	case <-guard.Changed():
		fmt.Println("the checkout moved:", errors.Is(guard.EnsureCurrent(), runtimeguard.ErrStale))
	case <-time.After(time.Minute):
		fmt.Println("no change seen")
	}
	// Output:
	// the checkout moved: true
}

// A server that imports its agent lazily binds when it loads it.
func ExampleGuard_Capture() {
	module := checkout() // your Git checkout (elided: see the top of the file)
	defer os.RemoveAll(filepath.Dir(module))
	var guard runtimeguard.Guard // unbound: every check passes
	fmt.Println(guard.EnsureCurrent())
	// … the agent module is imported on the first request …
	if err := guard.Capture(module); err != nil {
		log.Fatal(err)
	}
	update(module, "class AIAgent: revision = 2\n") // the updater commits
	fmt.Println(errors.Is(guard.EnsureCurrent(), runtimeguard.ErrStale))
	// Output:
	// <nil>
	// true
}

// A host that could not bind (the checkout moved, or cannot be read)
// still says what the updater is doing.
func ExampleObserve() {
	home := tempDir()
	defer os.RemoveAll(home)
	marker := filepath.Join(home, runtimeguard.HermesLayout.Marker)
	body := fmt.Sprintf("%d\n%d\n", os.Getpid(), time.Now().Unix())
	if err := os.WriteFile(marker, []byte(body), 0o644); err != nil {
		log.Fatal(err)
	}
	o, err := runtimeguard.Observe(runtimeguard.Options{HomeDir: home})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(o.Marker, o.State)
	// Output:
	// active active
}

// headOf is the revision the checkout of module is at.
func headOf(module string) string {
	g, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: os.TempDir()})
	if err != nil {
		log.Fatal(err)
	}
	return g.Identity().Revision
}

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

// The probes of an orchestrator or a load balancer, mounted beside the
// guarded handlers rather than behind the guard: a stale server stays live
// and, with no reload scheduled, ready, answering retryable 409s.
func ExampleGuard_ReadinessHandler() {
	module := checkout()
	defer os.RemoveAll(filepath.Dir(module))
	home := tempDir()
	defer os.RemoveAll(home)
	guard, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: home})
	if err != nil {
		log.Fatal(err)
	}
	api := http.NewServeMux() // the handlers that touch session state
	api.HandleFunc("/api/chat", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })

	mux := http.NewServeMux()
	mux.Handle("GET /livez", guard.LivenessHandler())
	mux.Handle("GET /readyz", guard.ReadinessHandler())
	mux.Handle("/", guard.Middleware(api)) // or a Reloader's Wrap
	srv := httptest.NewServer(mux)
	defer srv.Close()

	update(module, "class AIAgent: revision = 2\n")
	for _, path := range []string{"/api/chat", "/livez", "/readyz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode, len(body) > 0)
	}
	// Output:
	// /api/chat 409 true
	// /livez 200 true
	// /readyz 200 true
}

// A configuration mistake is an *OptionError that names the field, the
// value and why: a host can point its own configuration key at it.
func ExampleOptionError() {
	layout := runtimeguard.HermesLayout
	layout.Marker = "../outside"
	_, err := runtimeguard.New(runtimeguard.Options{HomeDir: "/srv/hermes", Layout: layout})

	var oe *runtimeguard.OptionError
	if errors.As(err, &oe) {
		fmt.Println("field:", oe.Field)
		fmt.Println("value:", oe.Value)
		fmt.Println("why:", oe.Reason)
	}
	fmt.Println(err)
	// Output:
	// field: Layout.Marker
	// value: ../outside
	// why: is not a relative path that stays inside its directory
	// runtimeguard: Layout.Marker "../outside": is not a relative path that stays inside its directory
}

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

// A guard's counts published with expvar, which serves every published
// variable as JSON at /debug/vars of http.DefaultServeMux: each read of
// the variable takes a fresh snapshot. The guard here is unbound (a
// server binds one with Options.ModulePath), so that the counts are known.
func ExampleGuard_Stats() {
	g, err := runtimeguard.New(runtimeguard.Options{})
	if err != nil {
		panic(err)
	}
	expvar.Publish("runtimeguard", expvar.Func(func() any { return g.Stats() }))

	for range 3 {
		_ = g.EnsureCurrent()
	}
	fmt.Println(expvar.Get("runtimeguard").String())
	// Output:
	// {"checks":3,"stale":0,"full_reads":0,"read_timeouts":0,"reloads":0,"reloads_abandoned":0}
}
