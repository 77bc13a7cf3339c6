//go:build !unix

package runtimeguard

import (
	"errors"
	"io/fs"
	"os"
)

// statStamp stats path. Without inode numbers or a change time, a stamp is
// the size, mode and modification time; the racy rule in stamp.settled is
// what makes it sound.
func statStamp(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return stamp{}, nil
		}
		return stamp{}, err
	}
	return stampOfInfo(fi), nil
}

// fstatStamp stamps an open file.
func fstatStamp(f *os.File) (stamp, error) {
	fi, err := f.Stat()
	if err != nil {
		return stamp{}, err
	}
	return stampOfInfo(fi), nil
}

func stampOfInfo(fi fs.FileInfo) stamp {
	return stamp{
		present: true,
		dir:     fi.IsDir(),
		mode:    uint32(fi.Mode()),
		size:    fi.Size(),
		mtime:   fi.ModTime().UnixNano(),
	}
}
