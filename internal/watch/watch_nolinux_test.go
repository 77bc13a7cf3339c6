//go:build !linux

package watch

import (
	"errors"
	"testing"
)

// Without inotify the watcher's errors are errors.ErrUnsupported, with
// what is missing.
func TestNoInotifyIsUnsupported(t *testing.T) {
	_, err := Shared()
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Shared() = %v, not errors.ErrUnsupported", err)
	}
	if _, err := (&Watcher{}).NewWaiter(); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("NewWaiter() = %v, not errors.ErrUnsupported", err)
	}
}
