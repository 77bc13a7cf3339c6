package runtimeguard

import (
	"cmp"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// PayloadType is the "type" of every stale payload.
const PayloadType = "agent_runtime_stale"

// ProblemType is the "type" of the RFC 9457 problem document.
const ProblemType = "https://github.com/runtimeguard/runtimeguard/blob/main/docs/payload.md"

// retryAfterSeconds is the Retry-After, in seconds, of a stale answer while
// a reload is scheduled: the new code is usually bound within it.
const retryAfterSeconds = 1

// Payload is the JSON body of the HTTP 409 that a stale runtime answers
// with. Its keys are frozen API:
//
//	{"error": "...", "type": "agent_runtime_stale", "retryable": true,
//	 "restart_scheduled": false, "agent_update_state": "unverified"}
type Payload struct {
	// Error is the operator-facing message; Type is [PayloadType].
	Error string `json:"error"`
	Type  string `json:"type"`
	// Retryable is always true; RestartScheduled is true while the
	// host reloads the new code.
	Retryable        bool `json:"retryable"`
	RestartScheduled bool `json:"restart_scheduled"`
	// AgentUpdateState is what was observed of the updater, if anything.
	AgentUpdateState UpdateState `json:"agent_update_state,omitempty"`
}

// StaleError is returned by [Guard.EnsureCurrent] when the bound checkout
// is no longer at the revision the server loaded. errors.Is(err,
// [ErrStale]) is true for it.
type StaleError struct {
	// Message is the operator-facing message, the payload's "error".
	Message string
	// State is what was observed of the updater.
	State UpdateState
	// Captured is the bound revision, and Current the one read now.
	Captured, Current string
	// Err is why no revision could be read ([ErrNotCheckout] where the
	// checkout names none); nil when HEAD names another revision.
	Err error
	// RestartScheduled is true while the host carries out a reload.
	RestartScheduled bool
}

// Error returns the message with both revisions.
func (e *StaleError) Error() string {
	if e == nil {
		return "runtimeguard: <nil *StaleError>"
	}
	var b strings.Builder
	b.WriteString("runtimeguard: ")
	b.WriteString(cmp.Or(e.Message, "the loaded runtime is stale"))
	b.WriteString(" (loaded revision ")
	b.WriteString(cmp.Or(e.Captured, "none"))
	switch {
	case e.Current != "":
		b.WriteString(", checkout now at ")
		b.WriteString(e.Current)
		if e.Err != nil {
			b.WriteString(": ")
			b.WriteString(e.Err.Error())
		}
	case e.Err != nil:
		b.WriteString(", checkout now: ")
		b.WriteString(e.Err.Error())
	default:
		b.WriteString(", checkout now has no revision")
	}
	if e.State != "" {
		b.WriteString("; update state ")
		b.WriteString(string(e.State))
	}
	b.WriteString(")")
	return b.String()
}

// Unwrap returns the read failure, if there was one.
func (e *StaleError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Is reports whether target is [ErrStale].
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Payload returns the JSON body of the 409.
func (e *StaleError) Payload() Payload {
	if e == nil {
		e = new(StaleError)
	}
	return Payload{Error: e.Message, Type: PayloadType, Retryable: true, RestartScheduled: e.RestartScheduled, AgentUpdateState: e.State}
}

// StatusCode returns [http.StatusConflict].
func (e *StaleError) StatusCode() int { return http.StatusConflict }

// LogValue implements [slog.LogValuer].
func (e *StaleError) LogValue() slog.Value {
	if e == nil {
		return slog.StringValue("<nil *StaleError>")
	}
	attrs := []slog.Attr{
		slog.String("captured", e.Captured),
		slog.String("current", e.Current),
		slog.String("update_state", string(e.State)),
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("read_error", e.Err.Error()))
	}
	return slog.GroupValue(attrs...)
}

// Problem is the RFC 9457 problem document of a stale runtime, with the
// payload's members as extension members.
type Problem struct {
	// Type ([ProblemType]), Title, Status (409) and Detail are the
	// problem's own members.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// The others are the payload's; StaleType is its "type".
	Error            string      `json:"error"`
	StaleType        string      `json:"stale_type"`
	Retryable        bool        `json:"retryable"`
	RestartScheduled bool        `json:"restart_scheduled"`
	AgentUpdateState UpdateState `json:"agent_update_state,omitempty"`
}

// Problem returns the RFC 9457 form of the error.
func (e *StaleError) Problem() Problem {
	if e == nil {
		e = new(StaleError)
	}
	return Problem{
		Type:             ProblemType,
		Title:            "Agent runtime is stale",
		Status:           http.StatusConflict,
		Detail:           e.Message,
		Error:            e.Message,
		StaleType:        PayloadType,
		Retryable:        true,
		RestartScheduled: e.RestartScheduled,
		AgentUpdateState: e.State,
	}
}

// WriteStale writes the 409 with the JSON [Payload] when err is or wraps a
// *[StaleError], and reports whether it did.
func WriteStale(w http.ResponseWriter, err error) bool {
	return writeStale(w, err, false)
}

// WriteStale is [WriteStale] for a handler that checks by hand, with the
// RFC 9457 [Problem] form where [Options.ProblemDetails] allows it and r
// prefers it.
func (g *Guard) WriteStale(w http.ResponseWriter, r *http.Request, err error) bool {
	if g == nil {
		g = nilGuard()
	}
	if staleOf(err) == nil {
		return false
	}
	if r != nil && g.config().problem {
		// The body depends on Accept: say so to caches.
		w.Header().Add("Vary", "Accept")
		return writeStale(w, err, prefersProblem(r.Header.Values("Accept")))
	}
	return writeStale(w, err, false)
}

// staleOf returns the StaleError in err's chain, or nil where there is
// none or it is a nil pointer.
func staleOf(err error) *StaleError {
	var se *StaleError
	if !errors.As(err, &se) {
		return nil
	}
	return se
}

// writeStale writes the 409 of err, in the problem form where problem is
// set.
func writeStale(w http.ResponseWriter, err error, problem bool) bool {
	se := staleOf(err)
	if se == nil {
		return false
	}
	contentType, v := "application/json", any(se.Payload())
	if problem {
		contentType, v = "application/problem+json", se.Problem()
	}
	body, err := json.Marshal(v)
	if err != nil { // unreachable: strings, bools and an int
		body = []byte(`{"error":"stale runtime","type":"` + PayloadType + `","retryable":true,"restart_scheduled":false}`)
	}
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if se.RestartScheduled {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	w.WriteHeader(http.StatusConflict)
	_, _ = w.Write(append(body, '\n'))
	return true
}

// Middleware calls next (nil: http.DefaultServeMux) only while
// [Guard.EnsureCurrent] finds the runtime current, and else answers the
// 409.
func (g *Guard) Middleware(next http.Handler) http.Handler {
	if g == nil {
		g = nilGuard()
	}
	if next == nil {
		next = http.DefaultServeMux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.EnsureCurrent(); err != nil {
			g.answerStale(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// answerStale hands a stale answer to the OnStale hook and writes it.
func (g *Guard) answerStale(w http.ResponseWriter, r *http.Request, err error) {
	if hook, se := g.config().onStale, staleOf(err); hook != nil && se != nil {
		hook(r, se)
	}
	if !g.WriteStale(w, r, err) {
		// Not a stale error: EnsureCurrent returns no other.
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// prefersProblem reports whether Accept rates application/problem+json
// higher than application/json (RFC 9110 section 12.5.1: the most specific
// matching range gives a type its quality).
func prefersProblem(accept []string) bool {
	problem := acceptQuality(accept, "application", "problem+json")
	return problem > 0 && problem > acceptQuality(accept, "application", "json")
}

// acceptQuality is the quality the Accept header values give a media type:
// that of the most specific range that matches it, 0 when none does.
func acceptQuality(accept []string, typ, sub string) float64 {
	best, bestRank := 0.0, -1
	for _, header := range accept {
		for _, part := range strings.Split(header, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			t, s, ok := strings.Cut(mt, "/")
			if !ok {
				continue
			}
			rank := -1
			switch {
			case t == typ && s == sub:
				rank = 2
			case t == typ && s == "*":
				rank = 1
			case t == "*" && s == "*":
				rank = 0
			}
			if rank < bestRank || rank < 0 {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || f < 0 || f > 1 {
					continue
				}
				q = f
			}
			if rank > bestRank || q > best {
				best, bestRank = q, rank
			}
		}
	}
	return best
}

// liveAnswer is the JSON body of a liveness answer.
type liveAnswer struct {
	Live     bool   `json:"live"`
	Revision string `json:"revision,omitempty"`
}

// readyAnswer is the JSON body of a readiness answer.
type readyAnswer struct {
	Ready            bool        `json:"ready"`
	Stale            bool        `json:"stale"`
	Revision         string      `json:"revision,omitempty"`
	Error            string      `json:"error,omitempty"`
	RestartScheduled bool        `json:"restart_scheduled"`
	AgentUpdateState UpdateState `json:"agent_update_state,omitempty"`
}

// LivenessHandler answers a liveness probe with 200 whenever the process
// serves HTTP: a stale runtime is no reason to restart it.
func (g *Guard) LivenessHandler() http.Handler {
	if g == nil {
		g = nilGuard()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, http.StatusOK, liveAnswer{Live: true, Revision: g.Identity().Revision})
	})
}

// ReadinessHandler answers a readiness probe by a check: 200 while no
// reload is scheduled, stale or not, and 503 while one is, so that a load
// balancer drains the server first. Mount it outside [Guard.Middleware].
func (g *Guard) ReadinessHandler() http.Handler {
	if g == nil {
		g = nilGuard()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := readyAnswer{Ready: true, Revision: g.Identity().Revision}
		if se := staleOf(g.EnsureCurrent()); se != nil {
			p := se.Payload()
			h.Stale, h.Error, h.RestartScheduled, h.AgentUpdateState = true, p.Error, p.RestartScheduled, p.AgentUpdateState
		}
		status := http.StatusOK
		if h.RestartScheduled {
			h.Ready, status = false, http.StatusServiceUnavailable
			w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		}
		writeHealth(w, status, h)
	})
}

// writeHealth writes a probe's answer, which no cache keeps.
func writeHealth(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v) // strings and bools only
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
