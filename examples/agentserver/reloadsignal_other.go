//go:build !unix

package main

import "context"

// acknowledgeReloads does nothing here: no service manager sends a reload
// signal on this platform.
func acknowledgeReloads(context.Context) {}
