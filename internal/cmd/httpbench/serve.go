package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/runtimeguard/runtimeguard"
	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// The guard's API this program uses beyond New, Options.ModulePath and
// HomeDir, Middleware, EnsureCurrent, ErrStale and Close, all in these
// two functions, so that a renamed API changes them alone (and a tree
// older than the rename is built with its own copy of this program):
// putting a guard on the stat path, and the path a guard's checks of an
// unchanged checkout take with the full reads they made.

// onStatPath returns opts with the guard's checks on the stat path.
func onStatPath(opts runtimeguard.Options) runtimeguard.Options {
	opts.Check = "stat"
	return opts
}

// checkPath returns the path g's checks take ("watch" or "stat") and the
// number of full reads of the checkout it has made.
func checkPath(g *runtimeguard.Guard) (path string, fullReads uint64) {
	return g.Observe().Check, g.Stats().FullReads
}

// ports are the cases, in the order of the table.
var ports = []string{"bare", "watch", "stat", "stale", "seed"}

// serve is the server: it makes the checkouts, binds the guards, prints
// "<port> <address>" for each port and then "ready", and serves until its
// standard input ends (the driver closed it, or ended) or it is
// interrupted. It removes its checkouts before it returns.
func serve() (err error) {
	dir, err := os.MkdirTemp("", "httpbench-")
	if err != nil {
		return err
	}
	defer func() {
		if rerr := os.RemoveAll(dir); err == nil {
			err = rerr
		}
	}()
	home := filepath.Join(dir, "home") // the updater's, empty
	if err := os.Mkdir(home, 0o755); err != nil {
		return err
	}
	// One checkout for the watch, stat and seed ports, which stays as it
	// is; one for the stale port, moved once its guard is bound.
	module, err := makeCheckout(filepath.Join(dir, "agent"))
	if err != nil {
		return err
	}
	moved, err := makeCheckout(filepath.Join(dir, "moved"))
	if err != nil {
		return err
	}

	var guards []*runtimeguard.Guard
	defer func() {
		for _, g := range guards {
			g.Close()
		}
	}()
	bind := func(opts runtimeguard.Options) (*runtimeguard.Guard, error) {
		g, err := runtimeguard.New(opts)
		if err != nil {
			return nil, err
		}
		guards = append(guards, g)
		return g, nil
	}
	watchGuard, err := bind(runtimeguard.Options{ModulePath: module, HomeDir: home})
	if err != nil {
		return err
	}
	statGuard, err := bind(onStatPath(runtimeguard.Options{ModulePath: module, HomeDir: home}))
	if err != nil {
		return err
	}
	staleGuard, err := bind(runtimeguard.Options{ModulePath: moved, HomeDir: home})
	if err != nil {
		return err
	}
	if err := os.WriteFile(moved, []byte("class AIAgent: revision = 'changed'\n"), 0o644); err != nil {
		return err
	}
	if _, err := git(filepath.Dir(moved), "commit", "-q", "-a", "-m", "changed"); err != nil {
		return err
	}
	if err := settle(watchGuard, "watch"); err != nil {
		return err
	}
	if err := settle(statGuard, "stat"); err != nil {
		return err
	}
	if err := staleGuard.EnsureCurrent(); !errors.Is(err, runtimeguard.ErrStale) {
		return fmt.Errorf("the stale port's guard does not answer stale after its checkout moved: %v", err)
	}
	s, err := newSeed(module)
	if err != nil {
		return err
	}

	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	handlers := map[string]http.Handler{
		"bare":  handler,
		"watch": watchGuard.Middleware(handler),
		"stat":  statGuard.Middleware(handler),
		"stale": staleGuard.Middleware(handler),
		"seed":  s.middleware(handler),
	}
	for _, name := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: handlers[name], ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		fmt.Printf("%s %s\n", name, ln.Addr())
	}
	fmt.Println("ready")

	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	select {
	case <-stop:
	case <-interrupt:
	}
	return nil
}

// settle checks with g until its checks of the unchanged checkout take
// the path named want and read nothing: until the checkout's files are old
// enough for their timestamps to prove them unchanged (Git's "racy" rule:
// 100 ms past their write on most file systems, 3 s on those with coarse
// timestamps), a check reads them again.
func settle(g *runtimeguard.Guard, want string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, before := checkPath(g)
		for range 100 {
			if err := g.EnsureCurrent(); err != nil {
				return fmt.Errorf("the %s port's guard: %w", want, err)
			}
		}
		path, after := checkPath(g)
		if path != want {
			return fmt.Errorf("the %s port's guard checks on the %q path", want, path)
		}
		if after == before {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %s port's guard still reads the checkout on every check after 30 s", want)
		}
		time.Sleep(20 * time.Millisecond) // for the files' timestamps to age
	}
}

// makeCheckout makes a repository in dir with one commit of run_agent.py,
// and returns the module's path.
func makeCheckout(dir string) (string, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	module := filepath.Join(dir, "run_agent.py")
	if err := os.WriteFile(module, []byte("class AIAgent: pass\n"), 0o644); err != nil {
		return "", err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "run_agent.py"}, {"commit", "-q", "-m", "loaded"}} {
		if _, err := git(dir, args...); err != nil {
			return "", err
		}
	}
	return module, nil
}

// git runs git, isolated from the user's configuration, in dir, and
// returns what it printed, trimmed.
func git(dir string, args ...string) (string, error) {
	cmd := gittest.Command(dir, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// seed is the check the guard replaces: on every request, three git
// processes (the checkout's top level, whether the module is tracked in
// its index, HEAD), their answers compared with what they said when the
// server started.
type seed struct {
	dir, name string // the module's directory and file name
	top, head string // as read at startup
}

func newSeed(module string) (*seed, error) {
	s := &seed{dir: filepath.Dir(module), name: filepath.Base(module)}
	var err error
	s.top, s.head, err = s.read()
	return s, err
}

// read asks git for the top level and HEAD, and fails where the module is
// not tracked.
func (s *seed) read() (top, head string, err error) {
	if top, err = git(s.dir, "rev-parse", "--show-toplevel"); err != nil {
		return "", "", err
	}
	if _, err = git(s.dir, "--literal-pathspecs", "ls-files", "--error-unmatch", "--", s.name); err != nil {
		return "", "", err
	}
	if head, err = git(s.dir, "rev-parse", "--verify", "HEAD"); err != nil {
		return "", "", err
	}
	return top, head, nil
}

// middleware answers 409 where git's answers differ from those at startup
// (or git fails), and calls next otherwise.
func (s *seed) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if top, head, err := s.read(); err != nil || top != s.top || head != s.head {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"type":"agent_runtime_stale","retryable":true}`+"\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}
