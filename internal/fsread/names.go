package fsread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ReadNames lists the names in the directory dir that keep takes, in the
// order the directory gives them, reading at most max entries in all: a
// directory with more is refused, never listed in part. Nothing at dir is
// no names and no error; something else than a directory there (a file, a
// FIFO: never waited on) is an error. Links are followed. On Windows the
// directory is opened shared for deletes, as the reads are, so that a
// writer may rename or remove it, or an entry of it, while it is listed.
func ReadNames(dir string, max int, keep func(name string) bool) ([]string, error) {
	f, err := openDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ListNames(f, max, keep)
}

// ListNames lists the names in the directory f (open for a listing) that
// keep takes, as ReadNames does.
func ListNames(f *os.File, max int, keep func(name string) bool) ([]string, error) {
	var names []string
	read := 0
	for {
		batch, err := f.Readdirnames(256)
		read += len(batch)
		if read > max {
			return nil, fmt.Errorf("%s holds more than %d entries", f.Name(), max)
		}
		if err != nil && err != io.EOF {
			return nil, err // never a part of the listing
		}
		for _, n := range batch {
			if keep(n) {
				names = append(names, n)
			}
		}
		if err == io.EOF || len(batch) == 0 {
			return names, nil
		}
	}
}
