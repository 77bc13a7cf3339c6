package runtimeguard_test

import (
	"expvar"
	"fmt"

	"github.com/runtimeguard/runtimeguard"
)

// A guard's counts published with expvar, which serves every published
// variable as JSON at /debug/vars of http.DefaultServeMux: each read of
// the variable takes a fresh snapshot. The guard here is unbound (a
// server binds one with Options.ModulePath), so that the counts are known.
func ExampleGuard_Stats() {
	g, err := runtimeguard.New(runtimeguard.Options{})
	if err != nil {
		panic(err)
	}
	expvar.Publish("runtimeguard", expvar.Func(func() any { return g.Stats() }))

	for range 3 {
		_ = g.EnsureCurrent()
	}
	fmt.Println(expvar.Get("runtimeguard").String())
	// Output:
	// {"checks":3,"stale":0,"full_reads":0,"read_timeouts":0,"reloads":0,"reloads_abandoned":0}
}
