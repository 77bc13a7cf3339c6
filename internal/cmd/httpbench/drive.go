package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The load: wrk's connections and threads (its default), loopback only.
const (
	connections = 16
	wrkThreads  = 2
)

// server is a running server process and its ports.
type server struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  map[string]string // port name to host:port
	rps   map[string][]float64
	ratio map[string][]float64 // to the bare port's rate in the same round
}

// drive starts the servers (name=path each), runs the rounds and prints
// the table.
func drive(rounds int, duration time.Duration, args []string) (err error) {
	names := map[string]bool{}
	for _, arg := range args {
		name, path, ok := strings.Cut(arg, "=")
		if !ok || name == "" || path == "" || names[name] {
			return fmt.Errorf("%q: give each server as name=path, under a name of its own", arg)
		}
		names[name] = true
	}
	if len(args) == 0 || rounds < 1 || duration < time.Second || duration%time.Second != 0 {
		return errors.New("give one or more servers as name=path, at least one round and a duration of whole seconds")
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("needs wrk (Debian: apt-get install wrk): %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var servers []*server
	defer func() {
		for _, s := range servers {
			if serr := s.stop(); err == nil {
				err = serr
			}
		}
	}()
	for _, arg := range args {
		name, path, _ := strings.Cut(arg, "=")
		s, err := start(name, path)
		if err != nil {
			return err
		}
		servers = append(servers, s)
	}

	fmt.Printf("httpbench: %d rounds of %s per port, %d connections, %d wrk threads, loopback, %d CPUs; load average %s\n",
		rounds, duration, connections, wrkThreads, runtime.NumCPU(), loadAverage())
	for round := range rounds {
		// Every port of every server in turn, the servers of a port one
		// after the other, in the opposite order every other round.
		order := slices.Clone(servers)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, port := range ports {
			for _, s := range order {
				rps, err := load(ctx, s, port, duration)
				if err != nil {
					return err
				}
				s.rps[port] = append(s.rps[port], rps)
			}
		}
		for _, s := range servers {
			bare := s.rps["bare"][round]
			for _, port := range ports {
				s.ratio[port] = append(s.ratio[port], s.rps[port][round]/bare)
			}
		}
	}
	fmt.Printf("load average at the end %s\n\n", loadAverage())

	fmt.Printf("%-6s %-12s %9s %19s %8s %21s\n", "port", "server", "req/s", "(range)", "x bare", "(range)")
	for _, port := range ports {
		for _, s := range servers {
			r, x := s.rps[port], s.ratio[port]
			fmt.Printf("%-6s %-12s %9.0f %19s %8.3g %21s\n", port, s.name,
				median(r), fmt.Sprintf("(%.0f to %.0f)", slices.Min(r), slices.Max(r)),
				median(x), fmt.Sprintf("(%.3g to %.3g)", slices.Min(x), slices.Max(x)))
		}
	}
	return nil
}

// start starts the server at path and reads its ports.
func start(name, path string) (*server, error) {
	s := &server{name: name, addr: map[string]string{}, rps: map[string][]float64{}, ratio: map[string][]float64{}}
	s.cmd = exec.Command(path, "-serve")
	s.cmd.Stderr = os.Stderr
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("server %s: %w", name, err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && lines.Text() != "ready" {
		port, addr, _ := strings.Cut(lines.Text(), " ")
		s.addr[port] = addr
	}
	if lines.Text() != "ready" {
		_ = s.stop()
		return nil, fmt.Errorf("server %s ended before it was ready", name)
	}
	// Each port answers as it should before it is loaded.
	for _, port := range ports {
		if _, ok := s.addr[port]; !ok {
			_ = s.stop()
			return nil, fmt.Errorf("server %s has no %s port", name, port)
		}
		resp, err := http.Get("http://" + s.addr[port] + "/")
		if err != nil {
			_ = s.stop()
			return nil, fmt.Errorf("server %s, port %s: %w", name, port, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != wantStatus(port) {
			_ = s.stop()
			return nil, fmt.Errorf("server %s, port %s answers %s", name, port, resp.Status)
		}
	}
	return s, nil
}

// stop closes the server's standard input, which ends it, and waits.
func (s *server) stop() error {
	s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		return fmt.Errorf("server %s: %w", s.name, err)
	}
	return nil
}

func wantStatus(port string) int {
	if port == "stale" {
		return http.StatusConflict
	}
	return http.StatusOK
}

var (
	requestsLine = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	rateLine     = regexp.MustCompile(`(?m)^Requests/sec:\s*([0-9.]+)\s*$`)
	otherLine    = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses: (\d+)\s*$`)
	errorsLine   = regexp.MustCompile(`(?m)^\s*Socket errors: .*$`)
)

// load runs wrk against a port of s and returns its requests per second.
// Every answer must have the port's status: wrk counts the others.
func load(ctx context.Context, s *server, port string, duration time.Duration) (float64, error) {
	url := "http://" + s.addr[port] + "/"
	out, err := exec.CommandContext(ctx, "wrk", "-t", strconv.Itoa(wrkThreads), "-c", strconv.Itoa(connections),
		"--timeout", "30s", "-d", fmt.Sprintf("%ds", duration/time.Second), url).CombinedOutput()
	fail := func(why string) (float64, error) {
		return 0, fmt.Errorf("wrk on server %s, port %s: %s\n%s", s.name, port, why, out)
	}
	if ctx.Err() != nil {
		return 0, errors.New("interrupted")
	}
	if err != nil {
		return fail(err.Error())
	}
	if m := errorsLine.Find(out); m != nil {
		return fail(strings.TrimSpace(string(m)))
	}
	total, rate := requestsLine.FindSubmatch(out), rateLine.FindSubmatch(out)
	if total == nil || rate == nil {
		return fail("no request count or rate")
	}
	others := "0"
	if m := otherLine.FindSubmatch(out); m != nil {
		others = string(m[1])
	}
	if wantStatus(port) == http.StatusOK && others != "0" || wantStatus(port) != http.StatusOK && others != string(total[1]) {
		return fail(fmt.Sprintf("%s of %s answers were not %d", others, total[1], wantStatus(port)))
	}
	return strconv.ParseFloat(string(rate[1]), 64)
}

func median(v []float64) float64 {
	s, n := slices.Sorted(slices.Values(v)), len(v)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// loadAverage is the system's load average over 1, 5 and 15 minutes,
// where Linux says it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
