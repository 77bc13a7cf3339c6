package runtimeguard_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/runtimeguard/runtimeguard"
)

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
