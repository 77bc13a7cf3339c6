//go:build !unix

package main

import (
	"context"

	"github.com/runtimeguard/runtimeguard/internal/systemd"
)

// acknowledgeReloads does nothing here: no service manager sends a reload
// signal on this platform.
func acknowledgeReloads(context.Context, *systemd.Notifier) {}
