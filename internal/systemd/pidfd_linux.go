package systemd

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pidFSMagic is the magic number of pidfs, the file system of pidfds
// (PID_FS_MAGIC of linux/magic.h).
const pidFSMagic = 0x50494446

// ownPidfdID is the ID of this process's pidfd, as systemd's
// pidfd_get_inode_id_self_cached reads it for $LISTEN_PIDFDID: the
// inode number of a pidfd on pidfs, where it is 64 bits wide; false where
// this kernel cannot tell (no pidfd_open, no pidfs, 32-bit inodes).
func ownPidfdID() (uint64, bool) {
	if strconv.IntSize != 64 {
		return 0, false
	}
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || uint64(fs.Type) != pidFSMagic {
		return 0, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, false
	}
	return st.Ino, true
}
