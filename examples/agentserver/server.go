package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"github.com/runtimeguard/runtimeguard"
)

// Server is a small agent server that keeps its sessions in one JSON file
// and follows the runtimeguard contract: it checks the guard before it looks
// up, creates or changes a session for work it runs itself. With a
// Reloader, it loads the new code once the updater's files prove that
// safe.
type Server struct {
	guard     *runtimeguard.Guard
	statePath string
	gateway   atomic.Bool   // chat turns are owned by a gateway process
	ownerRead atomic.Uint64 // how often ownership was decided, for tests

	// agent is the code the workers loaded: the module's revision and
	// text, read at start and again when the workers restart.
	agent atomic.Pointer[agentCode]

	// guard runs guarded work: the guard's middleware, or a Reloader's
	// wrap when the server reloads by itself.
	wrap func(http.Handler) http.Handler

	mu   sync.Mutex // protects the session file and jobs
	jobs map[string]*job
	bg   sync.WaitGroup // running background jobs
}

// agentCode is what the workers loaded.
type agentCode struct {
	Revision string
	Text     string
}

// NewServer returns a server whose sessions live in statePath; it loads
// the agent's code at the guard's module.
func NewServer(guard *runtimeguard.Guard, statePath string, gateway bool) *Server {
	s := &Server{guard: guard, statePath: statePath, jobs: map[string]*job{}, wrap: guard.Middleware}
	s.gateway.Store(gateway)
	id := guard.Identity()
	s.loadAgent(id.ModulePath, id.Revision)
	return s
}

// UseReloader runs the server's guarded work through rl, which reloads the
// server by itself. Call it before Handler.
func (s *Server) UseReloader(rl *runtimeguard.Reloader) { s.wrap = rl.Wrap }

// loadAgent is what restarting the workers does: they load the module
// from disk, at revision.
func (s *Server) loadAgent(module, revision string) {
	text, _ := os.ReadFile(module)
	s.agent.Store(&agentCode{Revision: revision, Text: string(text)})
}

// Restart is the in-process reload of a Reloader: the workers load the
// plan's new code. (The Reloader then binds the guard to it.)
func (s *Server) Restart(_ context.Context, plan *runtimeguard.Plan) error {
	s.loadAgent(plan.Identity.ModulePath, plan.To)
	return nil
}

// SetGateway changes who owns chat turns from the next request on.
func (s *Server) SetGateway(on bool) { s.gateway.Store(on) }

// Wait waits for the background jobs that are running.
func (s *Server) Wait() { s.bg.Wait() }

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat/start", s.chatStart)
	mux.HandleFunc("POST /api/chat/background", s.backgroundTurn)
	mux.HandleFunc("POST /api/session/compress", s.compressStart)
	mux.HandleFunc("GET /api/session/compress/status", s.compressStatus)
	mux.HandleFunc("GET /api/session", s.lookup)
	// The probes are no guarded work: never a 409, never drained.
	mux.Handle("GET /livez", s.guard.LivenessHandler())
	mux.Handle("GET /readyz", s.guard.ReadinessHandler())
	return mux
}

type message struct {
	Role  string `json:"role"`
	Text  string `json:"text"`
	Owner string `json:"owner"`
}

type session struct {
	ID       string    `json:"id"`
	Messages []message `json:"messages"`
}

type turnRequest struct {
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
}

// owner decides, once per request, which process runs the turn.
func (s *Server) owner() string {
	s.ownerRead.Add(1)
	if s.gateway.Load() {
		return "gateway"
	}
	return "local"
}

// chatStart starts a chat turn. A turn this process runs is refused with 409
// before any session is read or created when the runtime is stale; a turn a
// gateway owns does not depend on this process's code and skips the check.
func (s *Server) chatStart(w http.ResponseWriter, r *http.Request) {
	owner := s.owner()
	if owner != "local" {
		s.turn(w, r, owner)
		return
	}
	s.guarded(w, r, func() { s.turn(w, r, owner) })
}

// backgroundTurn runs a hidden turn in this process: it is always checked,
// whoever owns chat turns.
func (s *Server) backgroundTurn(w http.ResponseWriter, r *http.Request) {
	s.guarded(w, r, func() { s.turn(w, r, "local-background") })
}

// lookup reads a session: this process's code reads session state, so it
// is checked too. It answers with the revision of the code that served it.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	s.guarded(w, r, func() {
		id := r.URL.Query().Get("session_id")
		s.mu.Lock()
		sessions, err := s.load()
		s.mu.Unlock()
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		sess := sessions[id]
		if sess == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such session"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"session_id": id, "messages": len(sess.Messages), "revision": s.agent.Load().Revision, "pid": os.Getpid()})
	})
}

// guarded runs work that this process's code does, only once the guard
// says the runtime is current (and, with a Reloader, while no reload
// drains); otherwise the 409 is the answer, and nothing is read or
// written.
func (s *Server) guarded(w http.ResponseWriter, r *http.Request, work func()) {
	s.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { work() })).ServeHTTP(w, r)
}

func (s *Server) turn(w http.ResponseWriter, r *http.Request, owner string) {
	var req turnRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.SessionID == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {\"session_id\": ..., \"message\": ...}"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sessions, err := s.load()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	sess := sessions[req.SessionID]
	if sess == nil {
		sess = &session{ID: req.SessionID}
		sessions[req.SessionID] = sess
	}
	sess.Messages = append(sess.Messages, message{Role: "user", Text: req.Message, Owner: owner})
	if err := s.save(sessions); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"session_id": sess.ID, "owner": owner, "messages": len(sess.Messages)})
}

// job is a background compression. Its final state is kept and returned on
// every status read.
type job struct {
	state map[string]any
}

// compressStart starts compressing a session in the background.
func (s *Server) compressStart(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	if id == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "session_id is required"})
		return
	}
	s.mu.Lock()
	if j := s.jobs[id]; j != nil && j.state["status"] == "running" {
		s.mu.Unlock()
		writeJSON(w, http.StatusConflict, map[string]string{"error": "a compression is running"})
		return
	}
	s.jobs[id] = &job{state: map[string]any{"session_id": id, "status": "running"}}
	s.mu.Unlock()
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		final := s.compress(id)
		s.mu.Lock()
		s.jobs[id].state = final
		s.mu.Unlock()
	}()
	writeJSON(w, http.StatusAccepted, map[string]string{"session_id": id, "status": "running"})
}

// compress is the job: it runs this process's code, so it checks the guard
// before it reads the session. A stale runtime is its final state: the
// payload with error_status 409.
func (s *Server) compress(id string) map[string]any {
	if err := s.guard.EnsureCurrent(); err != nil {
		var se *runtimeguard.StaleError
		if !errors.As(err, &se) {
			return map[string]any{"session_id": id, "status": "error", "error_status": 500, "error": err.Error()}
		}
		state := map[string]any{"session_id": id, "status": "error", "error_status": se.StatusCode()}
		p := se.Payload()
		state["error"], state["type"], state["retryable"], state["restart_scheduled"] = p.Error, p.Type, p.Retryable, p.RestartScheduled
		if p.AgentUpdateState != "" {
			state["agent_update_state"] = p.AgentUpdateState
		}
		return state
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sessions, err := s.load()
	if err != nil {
		return map[string]any{"session_id": id, "status": "error", "error_status": 500, "error": err.Error()}
	}
	sess := sessions[id]
	if sess == nil {
		return map[string]any{"session_id": id, "status": "error", "error_status": 404, "error": "no such session"}
	}
	if n := len(sess.Messages); n > 2 {
		summary := message{Role: "system", Text: fmt.Sprintf("%d earlier messages compressed", n-2), Owner: "local"}
		sess.Messages = append([]message{summary}, sess.Messages[n-2:]...)
	}
	if err := s.save(sessions); err != nil {
		return map[string]any{"session_id": id, "status": "error", "error_status": 500, "error": err.Error()}
	}
	return map[string]any{"session_id": id, "status": "done", "messages": len(sess.Messages)}
}

func (s *Server) compressStatus(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session_id")
	s.mu.Lock()
	j := s.jobs[id]
	var state map[string]any
	if j != nil {
		state = j.state
	}
	s.mu.Unlock()
	if state == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no compression for this session"})
		return
	}
	writeJSON(w, http.StatusOK, state)
}

// load reads the session file; a missing file is no sessions.
func (s *Server) load() (map[string]*session, error) {
	sessions := map[string]*session{}
	data, err := os.ReadFile(s.statePath)
	if errors.Is(err, fs.ErrNotExist) {
		return sessions, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &sessions); err != nil {
		return nil, fmt.Errorf("%s: %w", s.statePath, err)
	}
	return sessions, nil
}

// save replaces the session file atomically and durably: a crash leaves
// the old sessions or the new, never a torn file.
func (s *Server) save(sessions map[string]*session) error {
	data, err := json.MarshalIndent(sessions, "", "  ")
	if err != nil {
		return err
	}
	return writeFileDurably(s.statePath, append(data, '\n'), 0o600)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
