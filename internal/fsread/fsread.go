// Package fsread reads files with care: stamps of what a stat says, and one
// bounded read of a regular file that never follows a link it was told not
// to, never blocks on a FIFO or device swapped in, and reads at most the
// size the descriptor reported plus one byte. The Git reader and the
// updater's marker reads share it.
package fsread

import "io/fs"

// TypeName names the type of a file mode for a message: "named pipe",
// "socket", "character device", "block device", "symbolic link",
// "directory"; "special file" for any other that is not regular.
func TypeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}
