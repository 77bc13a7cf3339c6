//go:build unix

package runtimeguard_test

import (
	"fmt"

	"github.com/runtimeguard/runtimeguard"
)

// The paths a guard's options resolve to, with the defaults applied, as a
// tool that writes the updater's files needs them.
func ExampleResolvePaths() {
	p, err := runtimeguard.ResolvePaths(runtimeguard.Options{
		HomeDir: "/srv/hermes",
		Python:  "/srv/hermes/hermes-agent/venv/bin/python",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Marker)
	fmt.Println(p.Receipt)
	fmt.Println(p.InstallRoot)
	// Output:
	// /srv/hermes/.hermes-update-in-progress
	// /srv/hermes/logs/update_receipts/latest.json
	// /srv/hermes/hermes-agent
}
