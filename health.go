package runtimeguard

import (
	"encoding/json"
	"net/http"
	"strconv"
)

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
