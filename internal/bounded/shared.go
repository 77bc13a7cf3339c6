package bounded

import (
	"runtime"
	"sync"
	"weak"
)

// shared are the process's executors, by key: see Shared.
var shared struct {
	mu sync.Mutex // protects m
	m  map[string]weak.Pointer[Executor]
}

// Shared returns the process's executor for key, made on its first use
// with panicked as its [Executor.Panicked]:
// every caller that names the same key (what the work touches, such as a
// directory) shares its one worker, so that a file system that stops
// answering holds one goroutine per key, whatever the number of callers
// and calls. An executor lives while anything holds it (a caller waiting
// on it, a worker that runs, an owner that keeps it); once nothing does,
// the key's next caller gets a new one, and the process keeps nothing of
// the old.
func Shared(key string, panicked func(value any, stack []byte) error) *Executor {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if x := shared.m[key].Value(); x != nil {
		return x
	}
	if shared.m == nil {
		shared.m = make(map[string]weak.Pointer[Executor])
	}
	x := &Executor{Panicked: panicked}
	wp := weak.Make(x)
	shared.m[key] = wp
	runtime.AddCleanup(x, func(key string) {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		if shared.m[key] == wp {
			delete(shared.m, key)
		}
	}, key)
	return x
}
