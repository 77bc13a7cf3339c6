//go:build !unix

package durable

// syncDir does nothing: a directory cannot be opened for a flush here. On
// Windows, os.Rename is MoveFileEx, whose rename NTFS journals.
func syncDir(string) error { return nil }
