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

// BenchmarkFIONREADFloor is one ioctl(FIONREAD) on an empty inotify
// descriptor: the cheapest question the kernel answers about a queue, the
// physical floor of a check that asks whether anything changed.
func BenchmarkFIONREADFloor(b *testing.B) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// TIOCINQ is FIONREAD.
		if n, err := unix.IoctlGetInt(fd, unix.TIOCINQ); err != nil || n != 0 {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkGetppid is the cheapest system call there is, for scale.
func BenchmarkGetppid(b *testing.B) {
	for i := 0; i < b.N; i++ {
		unix.Getppid()
	}
}
