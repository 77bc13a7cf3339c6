//go:build unix

package runtimeguard

import "github.com/runtimeguard/runtimeguard/internal/gittest"

// The shared harness's special files.
var (
	mkfifo   = gittest.Mkfifo
	mksocket = gittest.Mksocket
)
