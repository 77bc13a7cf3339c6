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

// ProblemType is the "type" URI of the RFC 9457 problem document for a
// stale runtime: the URL of docs/payload.md in the repository, the page
// that defines the payload. It names a file, not a heading of a page, so
// that it stays valid however the README is arranged.
const ProblemType = "https://github.com/runtimeguard/runtimeguard/blob/main/docs/payload.md"

// RetryAfterSeconds is the Retry-After, in seconds, of a stale answer while
// a reload is scheduled: the new code is usually bound within it.
const RetryAfterSeconds = 1

// Payload is the JSON body of the HTTP 409 a stale runtime answers with.
// Its keys are frozen API:
//
//	{"error": "...", "type": "agent_runtime_stale", "retryable": true,
//	 "restart_scheduled": false, "agent_update_state": "unverified"}
//
// agent_update_state is left out when there is none. restart_scheduled is
// true only while the host has a reload under way (see [Plan.Schedule]),
// and the message then asks the client to retry shortly.
type Payload struct {
	// Error is the operator-facing message.
	Error string `json:"error"`
	// Type is always PayloadType.
	Type string `json:"type"`
	// Retryable is always true: the request may be sent again once the
	// server runs the new code.
	Retryable bool `json:"retryable"`
	// RestartScheduled is true while the host reloads the new code; false
	// when the operator has to restart the server.
	RestartScheduled bool `json:"restart_scheduled"`
	// AgentUpdateState is what was observed of the updater, if anything.
	AgentUpdateState UpdateState `json:"agent_update_state,omitempty"`
}

// StaleError is returned by [Guard.EnsureCurrent] when the bound checkout no
// longer is at the revision the server loaded. errors.Is(err, [ErrStale])
// is true for it and for any error that wraps it.
type StaleError struct {
	// Message is the operator-facing message, the payload's "error".
	Message string
	// State is what could be observed of the updater when the check failed.
	State UpdateState
	// Captured is the revision the guard bound to; Current the one read
	// now, empty when none could be read.
	Captured, Current string
	// Err is why the current revision could not be read, or why the
	// checkout names none (an error matching [ErrNotCheckout]); nil when
	// it names another revision.
	Err error
	// RestartScheduled is true when the host had a reload under way.
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

// Problem is the RFC 9457 problem document for a stale runtime; the
// payload's fields ride along as extension members.
type Problem struct {
	// Type is ProblemType.
	Type string `json:"type"`
	// Title is a short summary of the problem type.
	Title string `json:"title"`
	// Status is 409.
	Status int `json:"status"`
	// Detail is the operator-facing message.
	Detail string `json:"detail"`
	// Error is the legacy payload's "error": the message again.
	Error string `json:"error"`
	// StaleType is the legacy payload's "type", PayloadType, renamed since
	// "type" is the problem's.
	StaleType string `json:"stale_type"`
	// Retryable is always true.
	Retryable bool `json:"retryable"`
	// RestartScheduled is true while the host reloads the new code.
	RestartScheduled bool `json:"restart_scheduled"`
	// AgentUpdateState is the update state, if any.
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

// WriteStale writes the 409 JSON payload when err is or wraps a
// *[StaleError], and reports whether it did. Like [http.Error], it sets the
// headers (Content-Type, Cache-Control: no-store, X-Content-Type-Options:
// nosniff) before the status. For the RFC 9457 form, negotiated with the
// request, use [Guard.WriteStale].
func WriteStale(w http.ResponseWriter, err error) bool {
	return writeStale(w, err, false)
}

// WriteStale is the package's [WriteStale] for a handler that checks by
// hand: with [Options.ProblemDetails], a request r that prefers
// application/problem+json gets the RFC 9457 problem document, as from
// [Guard.Middleware], with Vary: Accept. A nil r gets the plain JSON
// payload.
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
		h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	w.WriteHeader(http.StatusConflict)
	_, _ = w.Write(append(body, '\n'))
	return true
}

// Middleware runs [Guard.EnsureCurrent] before next and answers 409 without
// calling next when the runtime is stale, with Retry-After while a reload
// is scheduled. With [Options.ProblemDetails], a request that prefers
// application/problem+json gets the RFC 9457 form. [Options.OnStale] sees
// every stale answer. (A host that reloads by itself wraps its handlers
// with [Reloader.Wrap] instead, which also drains them for a reload.) A
// nil next is http.DefaultServeMux, as for an http.Server.
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

// LivenessHandler answers a liveness probe: 200 whenever the process
// serves HTTP at all. It never fails for a stale runtime (restarting a
// stale server is the operator's choice, or the Reloader's, not the
// orchestrator's) and reads nothing from disk:
//
//	{"live": true, "revision": "<bound revision>"}
//
// Mount it beside the guarded handlers, outside [Guard.Middleware] and
// [Reloader.Wrap], which would answer it with the 409:
//
//	mux := http.NewServeMux()
//	mux.Handle("GET /livez", guard.LivenessHandler())
//	mux.Handle("GET /readyz", guard.ReadinessHandler())
//	mux.Handle("/", reloader.Wrap(app))
func (g *Guard) LivenessHandler() http.Handler {
	if g == nil {
		g = nilGuard()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, http.StatusOK, liveAnswer{Live: true, Revision: g.Identity().Revision})
	})
}

// ReadinessHandler answers a readiness probe, a check of the checkout
// like any other ([Guard.EnsureCurrent]; it counts in [Guard.Stats]). It
// is ready (200) while the runtime is current, and while it is stale with
// no reload scheduled: the server then answers retryable 409s, and taking
// it out of service would only turn them into errors (and take every
// replica of a fleet one update moved out at once). It is not ready (503,
// with Retry-After) from the moment a reload is scheduled
// ([Plan.Schedule], as a [Reloader] does once the update is proven)
// until the new code is bound or the reload is abandoned, so that a load
// balancer drains the server first. A stale answer's body says why, in
// the words of the 409 ([Payload]):
//
//	{"ready": false, "stale": true, "revision": "<bound revision>",
//	 "error": "...", "restart_scheduled": true, "agent_update_state": "..."}
//
// Mount it outside [Guard.Middleware] and [Reloader.Wrap], as
// [Guard.LivenessHandler] shows.
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
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
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
