//go:build unix

package fsread

import (
	"errors"

	"golang.org/x/sys/unix"
)

// IgnoringEINTR retries fn while it fails with EINTR.
func IgnoringEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// ReadFull reads fd into buf until buf is full or the file ends, through
// raw reads: a descriptor opened with O_NONBLOCK is not handed to the
// runtime's poller, where a read of a FIFO would park.
func ReadFull(fd int, buf []byte) (n int, err error) {
	for n < len(buf) {
		var m int
		err := IgnoringEINTR(func() error {
			var err error
			m, err = unix.Read(fd, buf[n:])
			return err
		})
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}
