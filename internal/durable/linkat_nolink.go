//go:build solaris || aix

package durable

import "golang.org/x/sys/unix"

// linkat cannot link relative to a directory here: a file is then
// created in place (see CreateFile).
func linkat(int, string, string) error { return unix.ENOTSUP }
