package runtimeguard_test

import (
	"errors"
	"fmt"

	"github.com/runtimeguard/runtimeguard"
)

// A configuration mistake is an *OptionError that names the field, the
// value and why: a host can point its own configuration key at it.
func ExampleOptionError() {
	layout := runtimeguard.HermesLayout
	layout.Marker = "../outside"
	_, err := runtimeguard.New(runtimeguard.Options{HomeDir: "/srv/hermes", Layout: layout})

	var oe *runtimeguard.OptionError
	if errors.As(err, &oe) {
		fmt.Println("field:", oe.Field)
		fmt.Println("value:", oe.Value)
		fmt.Println("why:", oe.Reason)
	}
	fmt.Println(err)
	// Output:
	// field: Layout.Marker
	// value: ../outside
	// why: is not a relative path that stays inside its directory
	// runtimeguard: Layout.Marker "../outside": is not a relative path that stays inside its directory
}
