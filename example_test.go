package runtimeguard_test

import (
	"context"
	"errors"
	"expvar"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	home := tempDir() // the updater's home, which holds its checkout
	defer os.RemoveAll(home)
	module := filepath.Join(home, "hermes-agent", "run_agent.py") // where Hermes's installer puts it
	update(module, "class AIAgent: pass\n")                       // your Git checkout
	guard, err := runtimeguard.New(runtimeguard.Options{ModulePath: module, HomeDir: home})
	if err != nil {
		log.Fatal(err)
	}
	from := guard.Identity().Revision
	update(module, "class AIAgent: revision = 2\n") // the updater commits
	_, err = guard.PlanReload(context.Background())
	fmt.Println("no receipt:", errors.Is(err, runtimeguard.ErrNotReady))

	// The updater writes its receipt, as Hermes's writer does: it names no
	// checkout, and so proves a reload only of the checkout its home
	// installs (runtimeguard update writes one for any updater, naming
	// the checkout it updated).
	to := headOf(module) // the revision the update moved to (git rev-parse HEAD)
	receipt := fmt.Sprintf(`{"schema": 1, "update_id": "u1", "outcome": "success", "started_at": %q, "finished_at": %q, "pre_update": {"sha": %q}, "post_update": {"sha": %q}}`,
		time.Now().UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano), from, to)
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

// markdownFiles are the repository's documents whose links are checked.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "no docs/*.md")
	return append([]string{"README.md", "CHANGELOG.md"}, docs...)
}

var (
	markdownLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	markdownHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	markdownFence   = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```\n")
)

// withoutCode is a document without its fenced code blocks, whose
// brackets are not links and whose # lines are not headings.
func withoutCode(doc string) string {
	return markdownFence.ReplaceAllString(doc, "")
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces to
// hyphens, punctuation other than hyphens and underscores dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchorsOf(t *testing.T, file string) []string {
	t.Helper()
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	var anchors []string
	for _, m := range markdownHeading.FindAllStringSubmatch(withoutCode(string(body)), -1) {
		anchors = append(anchors, githubAnchor(m[1]))
	}
	return anchors
}

// Every relative link of the README, the changelog and docs/ names a file
// or directory of the repository, and every anchor a heading of its page:
// moving a page or renaming a heading breaks this test, not a reader's
// click.
func TestDocumentLinksResolve(t *testing.T) {
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	links := 0
	for _, file := range markdownFiles(t) {
		body, err := os.ReadFile(file)
		require.NoError(t, err, "%s", file)
		for _, m := range markdownLink.FindAllStringSubmatch(withoutCode(string(body)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, anchor, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				abs, err := filepath.Abs(resolved)
				require.NoError(t, err)
				if rel, err := filepath.Rel(root, abs); err != nil || !filepath.IsLocal(rel) {
					t.Errorf("%s: link %q leaves the repository", file, target)
					continue
				}
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %q names nothing: %v", file, target, err)
					continue
				}
			}
			if anchor != "" {
				if !strings.HasSuffix(resolved, ".md") {
					t.Errorf("%s: link %q has an anchor into a file that is not a page", file, target)
					continue
				}
				assert.Contains(t, anchorsOf(t, resolved), anchor, "%s: link %q names no heading of %s", file, target, resolved)
			}
		}
	}
	assert.NotZero(t, links, "no relative link found: the pattern is wrong")
}

// trimmedLines are a piece of Go's lines without their indentation and
// without blank lines, for comparing code across indentation levels.
func trimmedLines(code string) []string {
	var lines []string
	for line := range strings.SplitSeq(code, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

func containsRun(haystack, needle []string) bool {
	for i := 0; i+len(needle) <= len(haystack); i++ {
		if slices.Equal(haystack[i:i+len(needle)], needle) {
			return true
		}
	}
	return false
}

// The README's and docs/'s Go is code that is compiled: the README's whole
// program (the first screen) is Example_server with the imports that body
// uses, and every other Go block is a run of lines of one of the package's
// test files, so
// that an API change that breaks the README's code breaks the build of
// the tests, and an edit of one without the other fails here.
func TestREADMEGoCompiles(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	for _, name := range docs {
		doc, err := os.ReadFile(name)
		require.NoError(t, err)
		readme = append(readme, doc...)
	}
	tests, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	var sources [][]string
	for _, name := range tests {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		sources = append(sources, trimmedLines(string(src)))
	}

	programs := 0
	for _, m := range markdownFence.FindAllStringSubmatch(string(readme), -1) {
		if m[1] != "go" {
			continue
		}
		block := m[2]
		if strings.HasPrefix(block, "package main\n") {
			programs++
			checkProgramIsExample(t, block, "example_test.go", "Example_server")
			continue
		}
		found := slices.ContainsFunc(sources, func(src []string) bool { return containsRun(src, trimmedLines(block)) })
		assert.True(t, found, "a Go block of the README or docs/ is in no test file of the package:\n%s", block)
	}
	assert.Equal(t, 1, programs, "the README's first screen is one whole program")
}

// checkProgramIsExample checks that program's main is the body of the
// example function name in file, and that program imports exactly the
// packages that body uses.
func checkProgramIsExample(t *testing.T, program, file, name string) {
	t.Helper()
	fset := token.NewFileSet()
	prog, err := parser.ParseFile(fset, "README.md", program, parser.ParseComments)
	require.NoError(t, err, "README's program does not parse")
	formatted, err := format.Source([]byte(program))
	require.NoError(t, err)
	assert.Equal(t, string(formatted), program, "README's program is not gofmt'ed")
	exampleSrc, err := os.ReadFile(file)
	require.NoError(t, err)
	example, err := parser.ParseFile(fset, file, exampleSrc, parser.ParseComments)
	require.NoError(t, err)

	body := func(f *ast.File, src []byte, fn string) (string, *ast.BlockStmt) {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn && fd.Recv == nil {
				start, end := fset.Position(fd.Body.Lbrace).Offset, fset.Position(fd.Body.Rbrace).Offset
				return string(src[start+1 : end]), fd.Body
			}
		}
		t.Fatalf("%s has no func %s", fset.File(f.Pos()).Name(), fn)
		return "", nil
	}
	mainBody, _ := body(prog, []byte(program), "main")
	exampleBody, exampleBlock := body(example, exampleSrc, name)
	assert.Equal(t, trimmedLines(exampleBody), trimmedLines(mainBody), "README's main is not the body of %s in %s", name, file)

	// The imports the example's body uses, by the names the file gives them.
	byName := map[string]string{}
	for _, spec := range example.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		require.NoError(t, err)
		byName[filepath.Base(path)] = path
	}
	var used []string
	ast.Inspect(exampleBlock, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				if path, ok := byName[id.Name]; ok && !slices.Contains(used, path) {
					used = append(used, path)
				}
			}
		}
		return true
	})
	var imported []string
	for _, spec := range prog.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		require.NoError(t, err)
		imported = append(imported, path)
	}
	slices.Sort(used)
	slices.Sort(imported)
	assert.Equal(t, used, imported, "README's program imports other packages than its body uses")
}

// docSnippet is a fenced Go block of a document and the prose before it,
// back to the previous block or heading.
type docSnippet struct {
	doc, code, prose string
}

// goSnippets are the Go fragments (not whole programs) of the README and
// docs/, each with the prose that introduces it.
func goSnippets(t *testing.T) []docSnippet {
	t.Helper()
	var snippets []docSnippet
	for _, name := range append([]string{"README.md"}, must(filepath.Glob(filepath.Join("docs", "*.md")))...) {
		body, err := os.ReadFile(name)
		require.NoError(t, err)
		doc := string(body)
		last := 0
		for _, m := range markdownFence.FindAllStringSubmatchIndex(doc, -1) {
			prose := doc[last:m[0]]
			if h := markdownHeading.FindAllStringIndex(prose, -1); h != nil {
				prose = prose[h[len(h)-1][1]:]
			}
			last = m[1]
			if doc[m[2]:m[3]] != "go" || strings.HasPrefix(doc[m[4]:m[5]], "package main\n") {
				continue
			}
			snippets = append(snippets, docSnippet{name, doc[m[4]:m[5]], prose})
		}
	}
	return snippets
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var (
	testFileLink = regexp.MustCompile(`\]\(([^)\s#]+_test\.go)\)`)
	backquoted   = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*)(?:\\(\\))?`")
)

// freeNames are the names code uses that it does not declare (in its
// scopes, as the type checker finds them), in the order they appear.
func freeNames(t *testing.T, code string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "snippet.go", "package p\nfunc _() {\n"+code+"\n}\n", 0)
	require.NoError(t, err, "a Go block does not parse as statements:\n%s", code)
	var free []string
	conf := types.Config{Error: func(err error) {
		var te types.Error
		if errors.As(err, &te) {
			if name, ok := strings.CutPrefix(te.Msg, "undefined: "); ok && !slices.Contains(free, name) {
				free = append(free, name)
			}
		}
	}}
	_, _ = conf.Check("p", fset, []*ast.File{f}, nil)
	return free
}

// Every Go fragment of the README and docs/ can be read on its own: the
// prose before it links to the test file it runs in (and it is a run of
// lines of that file), and names in backquotes what it uses without
// declaring it, other than the packages that file imports: a reader who
// copies it knows what to supply.
func TestDocSnippetsShowWhatTheyUse(t *testing.T) {
	snippets := goSnippets(t)
	require.NotEmpty(t, snippets)
	for _, s := range snippets {
		links := testFileLink.FindAllStringSubmatch(s.prose, -1)
		if !assert.NotEmpty(t, links, "%s: a Go block without a link to the test file it runs in:\n%s", s.doc, s.code) {
			continue
		}
		file := filepath.Join(filepath.Dir(s.doc), filepath.FromSlash(links[len(links)-1][1]))
		src, err := os.ReadFile(file)
		require.NoError(t, err, "%s: the link to %s", s.doc, file)
		assert.True(t, containsRun(trimmedLines(string(src)), trimmedLines(s.code)), "%s: a Go block is not in %s, which it links to:\n%s", s.doc, file, s.code)

		parsed, err := parser.ParseFile(token.NewFileSet(), file, src, parser.ImportsOnly)
		require.NoError(t, err)
		imported := map[string]bool{}
		for _, spec := range parsed.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			require.NoError(t, err)
			imported[filepath.Base(path)] = true
			if spec.Name != nil {
				imported[spec.Name.Name] = true
			}
		}
		var named []string
		for _, m := range backquoted.FindAllStringSubmatch(s.prose, -1) {
			named = append(named, m[1])
		}
		for _, name := range freeNames(t, s.code) {
			if !imported[name] {
				assert.Contains(t, named, name, "%s: a Go block uses %s, which neither it nor the words before it show:\n%s", s.doc, name, s.code)
			}
		}
	}
}
