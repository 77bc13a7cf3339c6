// Package runtimeguard keeps a long-lived server from running code whose
// Git checkout moved under it, and tells when loading the new code is safe.
//
// A server that loaded code from a checkout (an agent written in Python,
// plugins, scripts) makes a [Guard] with [New], bound to the module file it
// loaded. Before it reads or changes session state, it calls
// [Guard.EnsureCurrent]. Once the checkout's HEAD has moved, or the module
// path leads to another file, the check fails with a *[StaleError], which
// [Guard.Middleware] and [WriteStale] write as a retryable HTTP 409 with a
// JSON body ([Payload]). An install without Git (a release directory, a
// Docker image, a Nix store path) is guarded by its module file and its
// build stamp (see [Identity]).
//
// The guard also reads the files of the updater that moves the checkout
// (see [Layout]): its in-progress marker, the recovery markers an
// interrupted update leaves, and its receipts. They say in the 409 whether
// an update is running ([UpdateState]), and [Guard.Observe] reports them.
//
// The guard restarts nothing by itself. A host that wants the new code
// loaded without an operator runs a [Reloader]: it waits for the updater's
// success receipt, drains the guarded requests, has the host load the new
// code, and binds the guard to it. [Guard.PlanReload] and [Plan] are the
// same steps, for a host that takes them by hand.
//
// A check starts no process: it reads Git's files itself. On Linux, a check
// of an unchanged checkout costs one system call (inotify tells of every
// change); elsewhere it costs one stat of each file the answer depends on.
// No call waits for the file system longer than [Options.ReadTimeout]: a
// file system that hangs makes checks fail closed, and holds one goroutine,
// not one per request.
//
// The repository's docs directory has the details: usage.md (a first
// program), checking.md (what a check reads and costs), updater.md (the
// updater's files), reload.md (reloading safely), payload.md (the 409),
// deploy.md (probes, systemd, Kubernetes) and git.md (what Git is read).
//
// # Platform notes
//
// Linux checks by inotify on local file systems, and by stat elsewhere;
// every other system checks by stat. On network file systems, set
// [Options].Check to "read". On Unix systems the updater's files are
// opened with O_NONBLOCK|O_NOFOLLOW and checked with fstat, and a process
// is alive if signal 0 reaches it; Linux and macOS also tell when a process
// started, so that a reused process ID does not keep a marker active. On
// Windows the marker is opened with FILE_FLAG_OPEN_REPARSE_POINT, and
// liveness comes from OpenProcess. Elsewhere the marker is never opened: a
// missing marker is absent and anything else is unknown. [ExecHandover]
// keeps sockets across exec on Unix only.
package runtimeguard
