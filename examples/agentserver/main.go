// Command agentserver is a small agent server that uses runtimeguard: chat
// turns and session reads it runs itself are refused with a retryable 409
// once the agent's checkout moved, before any session is read or written.
// With --reload, it loads the new code by itself once the guard proves the
// update that moved the checkout succeeded.
//
//	go run ./examples/agentserver --module /path/to/agent/run_agent.py
//
// Endpoints:
//
//	POST /api/chat/start                     {"session_id": "...", "message": "..."}
//	POST /api/chat/background                {"session_id": "...", "message": "..."}
//	GET  /api/session?session_id=ID          the session, and the revision that served it
//	POST /api/session/compress?session_id=ID starts a background compression
//	GET  /api/session/compress/status?session_id=ID
//	GET  /livez                              liveness: 200 while the process serves
//	GET  /readyz                             readiness: 503 while a reload is under way
//
// Reload modes (--reload):
//
//	off        answer 409 until the operator restarts the server (the default)
//	inprocess  restart the workers and rebind the guard (Plan.Bind)
//	exec       re-execute this program with the listening socket kept open;
//	           the new process binds with ExpectRevision set to the plan's
//	           revision. Where a socket cannot be kept across exec (Windows),
//	           the server exits with status 75 (EX_TEMPFAIL) for its
//	           supervisor to start it again.
//
// Under a service manager: with NOTIFY_SOCKET set (systemd's Type=notify
// or Type=notify-reload), the server says READY=1 once it serves,
// RELOADING=1 and READY=1 around each reload, and STOPPING=1 when it
// stops; a SIGHUP (systemctl reload) is acknowledged, and loads nothing
// that no update proved. With LISTEN_PID and LISTEN_FDS (socket
// activation), it serves the listening socket named http
// (FileDescriptorName=http), else the first passed, rather than --addr.
//
// Layouts (--layout): hermes (the default; --home, --lock) for hermes
// update's files, or git-sync for kubernetes/git-sync publishing by
// flipping the link --link (its --root joined with its --link) to each
// new worktree, the module given through it (--module LINK/run_agent.py):
// a flip to a worktree at the revision it is named after proves a reload.
//
// The first line on standard output is "listening ADDRESS".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/runtimeguard/runtimeguard"
)

// The reload modes.
const (
	reloadOff       = "off"       // answer 409 and wait for the operator
	reloadInProcess = "inprocess" // restart the workers and rebind the guard
	reloadExec      = "exec"      // hand the listening socket to a new process image
)

// usage prints the command line and the flags to w.
func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: agentserver --module FILE [flags]\n\nFlags:\n")
	flag.CommandLine.SetOutput(w)
	flag.PrintDefaults()
	flag.CommandLine.SetOutput(io.Discard)
	fmt.Fprint(w, `
Probes (never answered with the 409):
  GET /livez    200 while the process serves
  GET /readyz   200 while current or stale with no reload coming; 503 while a reload is under way

Under a service manager, on Unix (docs/deploy.md):
  NOTIFY_SOCKET   READY=1, RELOADING=1, STATUS= and STOPPING=1 are sent to it;
                  SIGHUP (systemctl reload) is acknowledged and loads nothing
  LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES
                  socket activation: the listening socket named http (else the first)
                  is served instead of --addr
`)
}

func main() {
	module := flag.String("module", "", "the agent module `FILE` this server loads (required)")
	home := flag.String("home", "", "the updater's home `DIR` (default $HERMES_HOME or ~/.hermes)")
	lock := flag.String("lock", "", "the updater's lock file, a `PATH` relative to the home (default none)")
	layoutName := flag.String("layout", "hermes", "the updater's layout: hermes or git-sync")
	link := flag.String("link", "", "with --layout git-sync, the `PATH` of the link git-sync flips")
	python := flag.String("python", "", "the agent's interpreter `PATH`")
	state := flag.String("state", "", "the session `FILE` (default sessions.json in the user's cache directory)")
	addr := flag.String("addr", "127.0.0.1:8787", "listen `ADDRESS`")
	gateway := flag.Bool("gateway", false, "chat turns are owned by a gateway process")
	reload := flag.String("reload", reloadOff, "how to load new code: off, inprocess or exec")
	drain := flag.Duration("drain", 10*time.Second, "how long in-flight work may take to finish before a reload")
	supervised := flag.Bool("supervised", false, "a supervisor starts the server again when it exits with status 75 (exec reloads on Windows)")
	flag.CommandLine.Init(os.Args[0], flag.ContinueOnError)
	flag.CommandLine.SetOutput(io.Discard)
	if err := flag.CommandLine.Parse(os.Args[1:]); errors.Is(err, flag.ErrHelp) {
		usage(os.Stdout) // asked for: standard output, exit 0
		return
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "agentserver: %v\n", err)
		usage(os.Stderr)
		os.Exit(2)
	}
	if *module == "" || (*reload != reloadOff && *reload != reloadInProcess && *reload != reloadExec) {
		fmt.Fprintln(os.Stderr, "agentserver: --module is required, and --reload is off, inprocess or exec")
		usage(os.Stderr)
		os.Exit(2)
	}
	if gitSync := *layoutName == "git-sync"; !gitSync && *layoutName != "hermes" || gitSync != (*link != "") || gitSync && (*home != "" || *lock != "") {
		fmt.Fprintln(os.Stderr, "agentserver: --layout is hermes or git-sync; --link goes with git-sync, and --home and --lock with hermes")
		usage(os.Stderr)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *state == "" {
		path, err := defaultStatePath()
		if err != nil {
			log.Fatal(err)
		}
		*state = path
	}

	// Set when this image was started by an exec handover (ExecHandover).
	inherited, err := runtimeguard.Inherit()
	if err != nil {
		log.Fatal(err)
	}
	ln, err := listener(*addr, inherited)
	if err != nil {
		log.Fatal(err)
	}
	layout := runtimeguard.HermesLayout
	layout.Lock = *lock
	if *layoutName == "git-sync" {
		layout = runtimeguard.GitSyncLayout(*link)
	}
	opts := runtimeguard.Options{ModulePath: *module, HomeDir: *home, Python: *python, Layout: layout, Logger: logger}
	// Set by the image this one replaced: New then checks what
	// Plan.Bind checks in process (the revision, and that no update
	// began since the plan: no marker, no recovery marker, no other
	// receipt).
	if inherited != nil {
		opts.ExpectRevision, opts.ExpectReceipt = inherited.ExpectRevision, inherited.ExpectReceipt
	}
	guard, err := runtimeguard.New(opts)
	if err != nil && opts.ExpectRevision == "" {
		log.Fatal(err)
	}
	inherited.Release()
	if err != nil {
		// A reloaded image whose new code cannot be bound (the checkout
		// moved during the handoff) fails closed and stays up: it answers
		// every request with the 409 until an operator restarts it.
		logger.Error("the reloaded code could not be bound; answering 409 until restarted", "error", err)
		serveStale(ln, &runtimeguard.StaleError{
			Message:  "The agent was updated on disk while the server reloaded it. Restart the server manually to load the new code.",
			Captured: opts.ExpectRevision,
			Err:      err,
		})
		return
	}
	id := guard.Identity()
	if opts.ExpectRevision != "" {
		// The image before this one scheduled the reload and logged that;
		// this line says it was done.
		logger.Info("bound after an exec reload", "revision", id.Revision, "receipt", opts.ExpectReceipt, "source_dir", id.SourceDir, "sessions", *state)
	} else {
		logger.Info("bound", "source_dir", id.SourceDir, "revision", id.Revision, "sessions", *state)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	acknowledgeReloads(ctx)
	srv := NewServer(guard, *state, *gateway)
	a := &app{drain: *drain, supervised: *supervised}
	done := make(<-chan struct{})
	if *reload != reloadOff {
		ro := runtimeguard.ReloaderOptions{DrainTimeout: *drain, Logger: logger, Restart: srv.Restart}
		if *reload == reloadExec {
			ro.Restart, ro.Handover = nil, a.handoff
		}
		rl, err := runtimeguard.NewReloader(ctx, guard, ro)
		if err != nil {
			log.Fatal(err)
		}
		srv.UseReloader(rl)
		done = rl.Done()
	}
	a.handler = srv.Handler()
	fmt.Printf("listening %s\n", ln.Addr())
	a.serve(ln)
	if *reload == reloadOff { // a Reloader says so itself
		notify(logger, "READY=1", "STATUS=serving "+id.Revision[:min(12, len(id.Revision))])
	}
	<-ctx.Done()
	notify(logger, "STOPPING=1", "STATUS=stopping")
	if *reload != reloadOff {
		<-done // a reload under way finishes first
	}
	a.shutdown()
	srv.Wait()
}

// serveStale answers every request with the stale 409 until the process
// is stopped.
func serveStale(ln net.Listener, se *runtimeguard.StaleError) {
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runtimeguard.WriteStale(w, se)
	})}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go hs.Serve(ln)
	fmt.Printf("listening %s\n", ln.Addr())
	notify(nil, "READY=1", "STATUS=stale: the reloaded code could not be bound; restart to load the new code")
	acknowledgeReloads(ctx)
	<-ctx.Done()
	notify(nil, "STOPPING=1", "STATUS=stopping")
	_ = hs.Close()
}

// app is the HTTP server in front of the Server: replaced, on the same
// socket, when a handoff fails.
type app struct {
	handler    http.Handler
	drain      time.Duration
	supervised bool
	conns      counter // open connections, for a handoff to wait on

	mu     sync.Mutex // protects hs, ln and served
	hs     *http.Server
	ln     net.Listener
	served chan struct{} // closed when hs.Serve returned
}

// serve serves on ln until shutdown or a handoff.
func (a *app) serve(ln net.Listener) {
	hs := &http.Server{Handler: a.handler, ReadHeaderTimeout: 10 * time.Second, ConnState: a.track}
	served := make(chan struct{})
	a.mu.Lock()
	a.hs, a.ln, a.served = hs, ln, served
	a.mu.Unlock()
	go func() {
		defer close(served)
		err := hs.Serve(ln)
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			log.Fatal(err)
		}
	}()
}

// track counts open connections.
func (a *app) track(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		a.conns.add(1)
	case http.StateClosed, http.StateHijacked:
		a.conns.add(-1)
	}
}

// counter counts, and tells when the count is zero.
type counter struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed while n is 0
}

func (c *counter) add(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.zero == nil {
		c.zero = make(chan struct{})
		close(c.zero)
	}
	was := c.n
	c.n += d
	switch {
	case was == 0 && c.n > 0:
		c.zero = make(chan struct{})
	case was > 0 && c.n == 0:
		close(c.zero)
	}
}

// idle returns a channel closed while the count is zero.
func (c *counter) idle() <-chan struct{} {
	c.add(0)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.zero
}

// quiesce stops accepting and waits, at most the drain time, until every
// connection is closed, each after the response to the request it is
// serving: the socket stays open through its other descriptor, and new
// connections wait in its backlog. Unlike http.Server.Shutdown, it lets a
// connection accepted a moment ago serve the request it reads, rather than
// close it unanswered.
func (a *app) quiesce() error {
	a.mu.Lock()
	hs, ln, served := a.hs, a.ln, a.served
	a.mu.Unlock()
	hs.SetKeepAlivesEnabled(false) // idle connections close now, busy ones after their response
	if err := ln.Close(); err != nil {
		return err
	}
	<-served // every connection it accepted is counted
	select {
	case <-a.conns.idle():
		return nil
	case <-time.After(a.drain):
		return errors.New("connections still open at the drain deadline")
	}
}

// shutdown stops accepting and waits, at most the drain time, for what is
// being served.
func (a *app) shutdown() {
	a.mu.Lock()
	hs := a.hs
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), a.drain)
	defer cancel()
	hs.SetKeepAlivesEnabled(false)
	_ = hs.Shutdown(ctx)
}

// handoff starts the plan's new code in a new process: see handoff_unix.go
// and handoff_windows.go. It returns only when that failed, with the server
// serving again on the old code.
func (a *app) handoff(ctx context.Context, plan *runtimeguard.Plan) error {
	a.mu.Lock()
	ln := a.ln
	a.mu.Unlock()
	return handoff(ctx, a, ln, plan)
}

// listener is the listening socket the image before this one kept across
// exec, or the one a service manager passed named http (socket
// activation; else the first it passed), or a new one on addr.
func listener(addr string, inherited *runtimeguard.Inherited) (net.Listener, error) {
	if inherited == nil || len(inherited.Listeners) == 0 {
		return net.Listen("tcp", addr)
	}
	served := inherited.Listeners[0]
	for _, l := range inherited.Listeners {
		if inherited.Name(l) == "http" {
			served = l
			break
		}
	}
	for _, l := range inherited.Listeners {
		if l != served {
			l.Close() // one HTTP server, one socket
		}
	}
	return served, nil
}

// notify tells the service manager, if there is one (NOTIFY_SOCKET); a
// failure is logged, where there is a logger, and changes nothing else.
func notify(logger *slog.Logger, assignments ...string) {
	if err := runtimeguard.Notify(assignments...); err != nil && logger != nil {
		logger.Warn("the service manager was not told", "error", err)
	}
}

// defaultStatePath is sessions.json in a directory of this program's under
// the user's cache directory ($XDG_CACHE_HOME, ~/Library/Caches,
// %LocalAppData%), never the working directory: run from a checkout, the
// server must not write into it.
func defaultStatePath() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "runtimeguard-agentserver")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return filepath.Join(dir, "sessions.json"), nil
}
