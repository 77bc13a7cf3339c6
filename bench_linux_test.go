package runtimeguard

import (
	"testing"

	"golang.org/x/sys/unix"
)

// watchedGuard binds to module on the watch path and proves it is there.
func watchedGuard(b *testing.B, module string) *Guard {
	return watchedGuardIn(b, module, watchEnv(b))
}

// watchedGuardIn is watchedGuard in the environment e.
func watchedGuardIn(b *testing.B, module string, e *env) *Guard {
	g, err := newGuard(Options{ModulePath: module, HomeDir: tempDir(b)}, e)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := g.EnsureCurrent(); err != nil {
			b.Fatal(err)
		}
	}
	if !onWatchPath(g) {
		b.Fatalf("not on the watch path: %+v", g.Observe())
	}
	return g
}

// BenchmarkEnsureCurrentWatch is a check of an unchanged checkout on the
// watch path: one epoll_wait.
func BenchmarkEnsureCurrentWatch(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		g := watchedGuard(b, module)
		b.Logf("watched for changes of:%s", depList(g))
		benchChecks(b, g)
	})
}

// BenchmarkEnsureCurrentWatchParallel is the same from GOMAXPROCS
// goroutines.
func BenchmarkEnsureCurrentWatchParallel(b *testing.B) {
	benchLayouts(b, func(b *testing.B, module string) {
		benchChecksParallel(b, watchedGuard(b, module))
	})
}

// BenchmarkEpollWaitFloor is the call a check on the watch path makes: one
// epoll_wait, with a zero timeout, on a set of an inotify descriptor (with
// a watch on a directory) and /proc/self/mountinfo, as the watch path's
// sets are, nothing being queued. It is the floor of that path: what a
// check of an unchanged checkout cannot pay less than. It runs on the
// caller's thread, as the check's does.
func BenchmarkEpollWaitFloor(b *testing.B) {
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, b.TempDir(), unix.IN_MODIFY|unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVE); err != nil {
		b.Fatal(err)
	}
	mounts, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(mounts)
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(ep)
	for _, c := range []struct {
		fd     int
		events uint32
	}{{in, unix.EPOLLIN}, {mounts, unix.EPOLLPRI}} {
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, c.fd, &unix.EpollEvent{Events: c.events, Fd: int32(c.fd)}); err != nil {
			b.Fatal(err)
		}
	}
	var events [4]unix.EpollEvent
	// The mount table's descriptor reports once, when it is new.
	if _, err := unix.EpollWait(ep, events[:], 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, err := unix.EpollWait(ep, events[:], 0); err != nil || n != 0 {
			b.Fatal(n, err)
		}
	}
}
