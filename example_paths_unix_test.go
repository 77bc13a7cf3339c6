//go:build unix

package runtimeguard_test

import (
	"fmt"

	"github.com/runtimeguard/runtimeguard"
)

// The paths a guard's options resolve to, with the defaults applied, as a
// tool that writes the updater's files needs them.
// A guard made without a module reads nothing.
func ExampleGuard_Paths() {
	g, err := runtimeguard.New(runtimeguard.Options{
		HomeDir: "/srv/hermes",
		Python:  "/srv/hermes/hermes-agent/venv/bin/python",
	})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	p := g.Paths()
	fmt.Println(p.Marker)
	fmt.Println(p.Receipt)
	fmt.Println(p.InstallRoot)
	// Output:
	// /srv/hermes/.hermes-update-in-progress
	// /srv/hermes/logs/update_receipts/latest.json
	// /srv/hermes/hermes-agent
}
