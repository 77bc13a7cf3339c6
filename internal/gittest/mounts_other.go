//go:build !linux

package gittest

import "testing"

// LockMounts holds nothing where the tests mount nothing: see the Linux
// one.
func LockMounts(tb testing.TB) (unlock func()) { return func() {} }
