// Command agentserver is a small agent server that uses runtimeguard: chat
// turns it runs itself are refused with a retryable 409 once the agent's
// checkout moved, before any session is read or written.
//
//	go run ./examples/agentserver --module /path/to/agent/run_agent.py
//
// Endpoints:
//
//	POST /api/chat/start                     {"session_id": "...", "message": "..."}
//	POST /api/chat/background                {"session_id": "...", "message": "..."}
//	POST /api/session/compress?session_id=ID starts a background compression
//	GET  /api/session/compress/status?session_id=ID
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/runtimeguard/runtimeguard"
)

func main() {
	module := flag.String("module", "", "the agent module `FILE` this server loads (required)")
	home := flag.String("home", "", "the updater's home `DIR` (default $HERMES_HOME or ~/.hermes)")
	python := flag.String("python", "", "the agent's interpreter `PATH`")
	state := flag.String("state", "", "the session `FILE` (default sessions.json in the user's state directory)")
	addr := flag.String("addr", "127.0.0.1:8787", "listen `ADDRESS`")
	gateway := flag.Bool("gateway", false, "chat turns are owned by a gateway process")
	flag.Parse()
	if *module == "" {
		flag.Usage()
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
	guard, err := runtimeguard.New(runtimeguard.Options{ModulePath: *module, HomeDir: *home, Python: *python, Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	id := guard.Identity()
	logger.Info("bound", "source_dir", id.SourceDir, "revision", id.Revision)

	logger.Info("sessions", "file", *state)
	srv := NewServer(guard, *state, *gateway)
	hs := &http.Server{Addr: *addr, Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	logger.Info("listening", "addr", *addr)
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	srv.Wait()
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
