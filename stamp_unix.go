//go:build unix

package runtimeguard

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// statStamp stats path, following links as the reads of Git's files do.
func statStamp(path string) (stamp, error) {
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Stat(path, &st) }); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return stamp{}, nil
		}
		return stamp{}, err
	}
	return stampOf(&st), nil
}

// fstatStamp stamps an open file.
func fstatStamp(f *os.File) (stamp, error) {
	conn, err := f.SyscallConn()
	if err != nil {
		return stamp{}, err
	}
	var st unix.Stat_t
	var statErr error
	if err := conn.Control(func(fd uintptr) {
		statErr = ignoringEINTR(func() error { return unix.Fstat(int(fd), &st) })
	}); err != nil {
		return stamp{}, err
	}
	if statErr != nil {
		return stamp{}, &os.PathError{Op: "fstat", Path: f.Name(), Err: statErr}
	}
	return stampOf(&st), nil
}

func stampOf(st *unix.Stat_t) stamp {
	m, c := st.Mtim, st.Ctim
	return stamp{
		present: true,
		dir:     st.Mode&unix.S_IFMT == unix.S_IFDIR,
		dev:     uint64(st.Dev),
		ino:     uint64(st.Ino),
		mode:    uint32(st.Mode),
		size:    st.Size,
		mtime:   m.Nano(),
		ctime:   c.Nano(),
	}
}
