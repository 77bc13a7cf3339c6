//go:build unix && !solaris && !aix

package durable

import "golang.org/x/sys/unix"

// linkat makes new a hard link to old, both entries of the directory dir.
func linkat(dir int, old, new string) error { return unix.Linkat(dir, old, dir, new, 0) }
