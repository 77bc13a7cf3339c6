//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// serverEnv makes the test binary the agent server: the end-to-end tests
// run the real main in a process of its own, and the exec reload
// re-executes that same binary.
const serverEnv = "AGENTSERVER_BE_THE_SERVER"

// runtimeguardBin is the runtimeguard command, built once for the tests
// that run an update through it; empty when no toolchain is at hand.
var (
	runtimeguardBin  string
	runtimeguardOnce sync.Once
)

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		os.Args = append(os.Args[:1], strings.Fields(os.Getenv(serverEnv))...)
		main()
		os.Exit(0)
	}
	code := m.Run()
	if runtimeguardBin != "" {
		os.RemoveAll(filepath.Dir(runtimeguardBin))
	}
	os.Exit(code)
}

// buildRuntimeguard builds the runtimeguard command, or skips the test
// where there is no go command to build it with.
func buildRuntimeguard(t *testing.T) string {
	t.Helper()
	runtimeguardOnce.Do(func() {
		if _, err := exec.LookPath("go"); err != nil {
			return
		}
		dir, err := os.MkdirTemp("", "runtimeguard-e2e-")
		require.NoError(t, err)
		bin := filepath.Join(dir, "runtimeguard")
		args := []string{"build", "-o", bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/runtimeguard/runtimeguard/cmd/runtimeguard")...).CombinedOutput()
		require.NoError(t, err, "go build: %s", out)
		runtimeguardBin = bin
	})
	if runtimeguardBin == "" {
		t.Skip("no go command to build runtimeguard with")
	}
	return runtimeguardBin
}

// deployment is an agent checkout cloned from an upstream that is one
// commit ahead, a home for the updater's files, and a server process.
type deployment struct {
	upstream, dir, home, state string
	loaded, ahead              string
	server                     *exec.Cmd
	addr                       string
	pid                        int
	prepare                    func(*exec.Cmd) // changes how the server is started, if set
	link                       string          // git-sync's link, where the server loads through it
	logs                       *gittest.Buffer // the server's standard error
}

// log is what the server logged so far.
func (d *deployment) log() string { return d.logs.String() }

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	gittest.Need(t)
	tmp := gittest.TempDir(t)
	d := &deployment{upstream: filepath.Join(tmp, "upstream"), dir: filepath.Join(tmp, "agent"),
		home: filepath.Join(tmp, "home"), state: filepath.Join(tmp, "sessions.json")}
	_, d.loaded = gittest.Agent(t, d.upstream)
	gittest.Git(t, tmp, "clone", "-q", d.upstream, d.dir)
	d.ahead = gittest.Commit(t, d.upstream, "run_agent.py", "class AIAgent: revision = 2\n")
	require.NoError(t, os.Mkdir(d.home, 0o755))
	return d
}

// start runs the server with the reload mode and waits for its address.
func (d *deployment) start(t *testing.T, mode string, env ...string) {
	t.Helper()
	updater := fmt.Sprintf("--module %s --home %s --lock update.lock", filepath.Join(d.dir, "run_agent.py"), d.home)
	if d.link != "" {
		updater = fmt.Sprintf("--layout git-sync --link %s --module %s", d.link, filepath.Join(d.link, "run_agent.py"))
	}
	args := fmt.Sprintf("%s --state %s --addr 127.0.0.1:0 --reload %s --drain 5s", updater, d.state, mode)
	cmd := gittest.Self(nil, append([]string{serverEnv + "=" + args}, env...)...)
	if d.prepare != nil {
		d.prepare(cmd)
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	d.logs = new(gittest.Buffer)
	cmd.Stderr = d.logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", d.log())
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				line <- a
			}
		}
	}()
	select {
	case d.addr = <-line:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not start")
	}
	d.server, d.pid = cmd, cmd.Process.Pid
}

// update runs the runtimeguard updater in the checkout with argv.
func (d *deployment) update(t *testing.T, argv ...string) {
	t.Helper()
	bin := buildRuntimeguard(t)
	cmd := exec.Command(bin, append([]string{"update", "--module", filepath.Join(d.dir, "run_agent.py"), "--home", d.home, "--lock", "update.lock", "--"}, argv...)...)
	cmd.Dir, cmd.Env = d.dir, gittest.Env
	out, err := cmd.CombinedOutput()
	t.Logf("runtimeguard update %v: %v\n%s", argv, err, out)
}

// answer is one response the client saw, or the error it got instead.
type answer struct {
	status           int
	revision         string
	pid              float64
	retryable        bool
	restartScheduled bool
	message          string
	retryAfter       string
	err              error
}

// client sends guarded requests without pause until stopped and keeps
// every answer.
type client struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	done    chan struct{}
}

func (d *deployment) client(t *testing.T) *client {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	post, err := hc.Post("http://"+d.addr+"/api/chat/start", "application/json", strings.NewReader(`{"session_id":"s1","message":"hello"}`))
	require.NoError(t, err)
	post.Body.Close()
	require.Equal(t, http.StatusOK, post.StatusCode)
	c := &client{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			a := answer{}
			resp, err := hc.Get("http://" + d.addr + "/api/session?session_id=s1")
			if err != nil {
				a.err = err
			} else {
				var body map[string]any
				a.status = resp.StatusCode
				if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
					a.err = fmt.Errorf("status %d, body: %w", resp.StatusCode, err)
				}
				resp.Body.Close()
				a.revision, _ = body["revision"].(string)
				a.pid, _ = body["pid"].(float64)
				a.retryable, _ = body["retryable"].(bool)
				a.restartScheduled, _ = body["restart_scheduled"].(bool)
				a.message, _ = body["error"].(string)
				a.retryAfter = resp.Header.Get("Retry-After")
			}
			c.mu.Lock()
			c.answers = append(c.answers, a)
			c.mu.Unlock()
		}
	}()
	return c
}

// until waits for an answer that satisfies ok, at most 60 s.
func (c *client) until(t *testing.T, what string, ok func(answer) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		n := len(c.answers)
		found := n > 0 && ok(c.answers[n-1])
		c.mu.Unlock()
		if found {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no answer %s within 60 s", what)
}

// mark is how many answers the client saw so far, for seen to look at the
// ones after it.
func (c *client) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.answers)
}

// seen waits for an answer after the first from that satisfies ok, at
// most 60 s: unlike until, it finds an answer that a newer one has
// followed already.
func (c *client) seen(t *testing.T, from int, what string, ok func(answer) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for ; from < len(c.answers); from++ {
			if ok(c.answers[from]) {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no answer %s within 60 s", what)
}

// finish stops the client and returns what it saw.
func (c *client) finish() []answer {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answers
}

// phases checks that the answers are, in this order, 200 from the old
// revision, 409 retryable, and (when the reload happened) 200 from the new
// one; no error, no 5xx. It returns how many of each it saw.
func phases(t *testing.T, answers []answer, old, new string) (olds, conflicts, news int) {
	t.Helper()
	phase := 0
	for i, a := range answers {
		require.NoError(t, a.err, "answer %d", i)
		switch {
		case a.status == http.StatusOK && a.revision == old && phase == 0:
			olds++
		case a.status == http.StatusConflict && a.retryable && phase <= 1:
			phase = 1
			conflicts++
		case a.status == http.StatusOK && a.revision == new && new != "":
			phase = 2
			news++
		default:
			t.Fatalf("answer %d of %d out of order (phase %d): %+v", i, len(answers), phase, a)
		}
	}
	return olds, conflicts, news
}

// An update proven by its receipt is reloaded with no request lost: every
// answer is 200 from the old code, 409 retryable, or 200 from the new
// code, in that order, with no connection refused or reset and no 5xx.
func TestReloadEndToEnd(t *testing.T) {
	for _, mode := range []string{reloadInProcess, reloadExec} {
		t.Run(mode, func(t *testing.T) {
			d := newDeployment(t)
			d.start(t, mode)
			c := d.client(t)
			c.until(t, "from the old code", func(a answer) bool { return a.revision == d.loaded })
			d.update(t, "git", "pull", "-q", "--ff-only")
			c.until(t, "from the new code", func(a answer) bool { return a.revision == d.ahead })
			time.Sleep(200 * time.Millisecond) // answers after the reload too
			answers := c.finish()
			olds, conflicts, news := phases(t, answers, d.loaded, d.ahead)
			t.Logf("%d answers: %d old, %d 409, %d new", len(answers), olds, conflicts, news)
			assert.Positive(t, olds)
			assert.Positive(t, news)
			// The log says the reload was done, whichever image did it.
			done := `msg="runtimeguard: reloaded" from=` + d.loaded + " to=" + d.ahead
			if mode == reloadExec {
				done = `msg="bound after an exec reload" revision=` + d.ahead + " receipt="
			}
			assert.Contains(t, d.log(), done)
			for i, a := range answers {
				if a.status == http.StatusOK {
					assert.Equal(t, float64(d.pid), a.pid, "the same process serves, before and after")
				}
				if a.status != http.StatusConflict {
					continue
				}
				// A server that reloads by itself never asks for a
				// manual restart: while the update runs its 409 says it
				// reloads by itself, once the reload is scheduled it
				// says so, with Retry-After.
				assert.NotContains(t, a.message, "manually", "answer %d: %+v", i, a)
				if a.restartScheduled {
					assert.Equal(t, "1", a.retryAfter, "answer %d", i)
				} else {
					assert.Contains(t, a.message, "reloads by itself", "answer %d: %+v", i, a)
				}
			}
		})
	}
}

// An updater that fails leaves the server on the old code, answering 409
// with restart_scheduled false: no receipt proves anything.
func TestNoReloadAfterAFailedUpdate(t *testing.T) {
	for _, mode := range []string{reloadInProcess, reloadExec} {
		t.Run(mode, func(t *testing.T) {
			d := newDeployment(t)
			d.start(t, mode)
			c := d.client(t)
			c.until(t, "from the old code", func(a answer) bool { return a.revision == d.loaded })
			d.update(t, "sh", "-c", "git pull -q --ff-only && exit 1")
			c.until(t, "409", func(a answer) bool { return a.status == http.StatusConflict })
			time.Sleep(time.Second) // time enough for a reload that must not come
			answers := c.finish()
			_, conflicts, news := phases(t, answers, d.loaded, "")
			assert.Positive(t, conflicts)
			assert.Zero(t, news)
			for _, a := range answers {
				assert.False(t, a.restartScheduled, "%+v", a)
			}
		})
	}
}

// held is a chat turn the server has begun, its request's body not all
// sent yet: the turn is guarded work in flight, which a reload drains,
// until it is released (within the drain time).
type held struct {
	conn net.Conn
	rest string // the body's end, not sent yet
}

// hold begins a chat turn: the server runs it (while the runtime is
// current) up to reading the body, and waits there for the rest.
func (d *deployment) hold(t *testing.T) *held {
	t.Helper()
	conn, err := net.Dial("tcp", d.addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	body := `{"session_id":"s1","message":"held"}`
	_, err = fmt.Fprintf(conn, "POST /api/chat/start HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:len(body)-1])
	require.NoError(t, err)
	return &held{conn: conn, rest: body[len(body)-1:]}
}

// release sends the rest of the body and returns the answer's status.
func (h *held) release(t *testing.T) int {
	t.Helper()
	defer h.conn.Close()
	_, err := io.WriteString(h.conn, h.rest)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(h.conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// The checkout moves again during an exec handoff, to a commit that no
// longer tracks the module: the new image cannot bind. It fails closed and
// stays up: no connection error, no 5xx, and it answers 409 at the end,
// and a reload the service manager asks for then (systemctl reload) is
// acknowledged and ends nothing. A chat turn held in flight since before
// the update keeps the handoff draining until the checkout moved. The 409
// the update causes is looked for among every answer since the update
// started: the handoff may begin before the update command has exited.
func TestExecHandoffWhenTheCheckoutMovesAgain(t *testing.T) {
	d := newDeployment(t)
	sock, next := notifySocket(t)
	d.start(t, reloadExec, "NOTIFY_SOCKET="+sock)
	c := d.client(t)
	c.until(t, "from the old code", func(a answer) bool { return a.revision == d.loaded })
	updating := c.mark()
	h := d.hold(t)
	d.update(t, "git", "pull", "-q", "--ff-only")
	c.seen(t, updating, "a 409", func(a answer) bool { return a.status == http.StatusConflict })
	// The reload is scheduled once a 409 says so (the held request keeps
	// it draining).
	c.seen(t, updating, "a 409 of a scheduled reload", func(a answer) bool { return a.status == http.StatusConflict && a.restartScheduled })
	gittest.Git(t, d.dir, "rm", "-q", "--cached", "run_agent.py")
	gittest.Git(t, d.dir, "commit", "-q", "-m", "untrack the module")
	assert.Less(t, h.release(t), 500, "the held request")
	c.until(t, "a 409 after the move", func(a answer) bool { return a.status == http.StatusConflict && !a.restartScheduled })
	time.Sleep(500 * time.Millisecond)
	answers := c.finish()
	for i, a := range answers {
		require.NoError(t, a.err, "answer %d", i)
		require.Less(t, a.status, 500, "answer %d: %+v", i, a)
	}
	assert.Contains(t, d.log(), "the reloaded code could not be bound", "the handoff saw the move")
	last := answers[len(answers)-1]
	assert.Equal(t, http.StatusConflict, last.status, "the server is up and fails closed")
	assert.True(t, last.retryable)

	require.NoError(t, d.server.Process.Signal(syscall.SIGHUP))
	for msg := next(); !slices.Equal(msg, []string{"RELOADING=1", "MONOTONIC_USEC="}); msg = next() {
	}
	assert.Equal(t, []string{"READY=1"}, next())
	resp, err := http.Get("http://" + d.addr + "/api/session")
	require.NoError(t, err, "the server is up after systemctl reload")
	resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
}

// The image an exec handoff starts binds the planned revision only if no
// update began meanwhile: with a live update marker (an updater that took
// no lock), or a receipt newer than the plan's, it answers 409 and never
// serves the code on disk; with neither, it serves.
func TestHandoffImageRefusesAnUpdateUnderWay(t *testing.T) {
	receipt := func(id, outcome, sha string, finished time.Time) string {
		return fmt.Sprintf(`{"schema":1,"update_id":%q,"outcome":%q,"started_at":%q,"finished_at":%q,"pre_update":{},"post_update":{"sha":%q}}`,
			id, outcome, finished.Add(-time.Second).UTC().Format(time.RFC3339Nano), finished.UTC().Format(time.RFC3339Nano), sha)
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, d *deployment)
		want  int
	}{
		{"an update marker", func(t *testing.T, d *deployment) {
			marker := filepath.Join(d.home, ".hermes-update-in-progress")
			require.NoError(t, os.WriteFile(marker, []byte(fmt.Sprintf("%d\n%d\n", os.Getpid(), time.Now().Unix())), 0o644))
		}, http.StatusConflict},
		{"another receipt", func(t *testing.T, d *deployment) {
			other := filepath.Join(d.home, "logs", "update_receipts", "update_20261201T000000Z_1_later.json")
			require.NoError(t, os.WriteFile(other, []byte(receipt("later", "failed", d.loaded, time.Now())), 0o644))
		}, http.StatusConflict},
		{"nothing since the plan", func(t *testing.T, d *deployment) {}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(t)
			latest := filepath.Join(d.home, "logs", "update_receipts", "latest.json")
			require.NoError(t, os.MkdirAll(filepath.Dir(latest), 0o755))
			require.NoError(t, os.WriteFile(latest, []byte(receipt("planned", "success", d.loaded, time.Now().Add(-time.Minute))), 0o644))
			tc.setup(t, d)
			handedOver(t, d)
			d.start(t, reloadExec, "RUNTIMEGUARD_HANDOVER_REVISION="+d.loaded, "RUNTIMEGUARD_HANDOVER_RECEIPT=update_id:planned")
			for i := 0; i < 3; i++ {
				resp, err := http.Post("http://"+d.addr+"/api/chat/start", "application/json", strings.NewReader(`{"session_id":"s1","message":"hello"}`))
				require.NoError(t, err)
				var body map[string]any
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
				resp.Body.Close()
				require.Equal(t, tc.want, resp.StatusCode, "%v", body)
				if tc.want == http.StatusConflict {
					assert.Equal(t, true, body["retryable"])
					assert.Equal(t, false, body["restart_scheduled"])
				}
			}
			_, err := os.Stat(d.state)
			if tc.want == http.StatusConflict {
				assert.ErrorIs(t, err, os.ErrNotExist, "no session state was written")
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

// handedOver starts the server as the image an exec handover started:
// RUNTIMEGUARD_HANDOVER_PID names its process (a shell sets it to its own
// ID and execs the server, keeping it), beside the plan's revision and
// receipt the test passes.
func handedOver(t *testing.T, d *deployment) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	d.prepare = func(cmd *exec.Cmd) {
		cmd.Args = []string{"sh", "-c", `RUNTIMEGUARD_HANDOVER_PID=$$ exec "$0"`, cmd.Path}
		cmd.Path = sh
	}
}

// Help goes to standard output with exit 0; a bad command line to standard
// error with exit 2.
func TestCommandLine(t *testing.T) {
	run := func(args string) (stdout, stderr string, code int) {
		cmd := gittest.Self(nil, serverEnv+"="+args)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return o.String(), e.String(), code
	}
	stdout, stderr, code := run("-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "Usage: agentserver --module FILE")
	assert.Contains(t, stdout, "-reload")
	// What a deployment wires besides the flags: the probes, the service
	// manager's variables, the signal it sends.
	for _, s := range []string{"GET /livez", "GET /readyz", "NOTIFY_SOCKET", "LISTEN_FDS", "SIGHUP", "docs/deploy.md"} {
		assert.Contains(t, stdout, s)
	}
	assert.Empty(t, stderr)
	for _, args := range []string{"--bogus", "--reload sometimes --module x.py", "--addr 127.0.0.1:0",
		"--module x.py --layout git-sync", "--module x.py --link /git/agent", "--module x.py --layout other",
		"--module x.py --layout git-sync --link /git/agent --home /h"} {
		stdout, stderr, code = run(args)
		assert.Equal(t, 2, code, args)
		assert.Empty(t, stdout, args)
		assert.Contains(t, stderr, "Usage: agentserver", args)
	}
}
