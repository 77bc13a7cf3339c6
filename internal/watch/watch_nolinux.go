//go:build !linux

package watch

import (
	"errors"
	"fmt"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gitread"
)

// errNoInotify is the error of a platform without the watch path.
var errNoInotify = fmt.Errorf("no inotify on this platform: %w", errors.ErrUnsupported)

// Watcher is absent here: see Shared.
type Watcher struct{}

// Sub is absent here.
type Sub struct{}

// Shared reports that this platform has no watch path: guards keep the
// stat path.
func Shared() (*Watcher, error) { return nil, errNoInotify }

// Subscribe is never called here.
func (w *Watcher) Subscribe() *Sub { return &Sub{} }

// Read is absent here.
type Read struct{}

// Begin starts a read that nothing vouches for.
func (s *Sub) Begin() Read { return Read{} }

// Sub is never called here.
func (r Read) Sub() *Sub { return nil }

// Unchanged is never true here.
func (r Read) Unchanged() bool { return false }

// Recheck is never true here.
func (r Read) Recheck() bool { return false }

// Overtaken is never true here.
func (r Read) Overtaken() bool { return false }

// Dirty is always true here.
func (r Read) Dirty() bool { return true }

// Arm fails here.
func (s *Sub) Arm(gitread.Deps, []gitread.Route, *gitread.FS, time.Time) error { return errNoInotify }

// Calls counts system calls a subscription's arming made: none here.
type Calls struct {
	Statfs, AddWatch, RmWatch uint64
}

// Calls is always zero here.
func (s *Sub) Calls() Calls { return Calls{} }

// Close does nothing here.
func (s *Sub) Close() {}

// Waiter is absent here.
type Waiter struct{}

// NewWaiter fails here.
func (w *Watcher) NewWaiter() (*Waiter, error) { return nil, errNoInotify }

// Wait never blocks here.
func (wt *Waiter) Wait() bool { return false }

// Stop does nothing here.
func (wt *Waiter) Stop() {}

// Close does nothing here.
func (wt *Waiter) Close() {}

// MountChanges is always 0: there is no watcher here.
func (w *Watcher) MountChanges() uint64 { return 0 }
