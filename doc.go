// Package runtimeguard keeps a long-lived server from running code whose
// Git checkout moved under it, and tells when loading the new code is safe.
//
// A server that loaded code from a checkout (an agent written in Python,
// plugins, scripts) binds a [Guard] to the module file it loaded ([New]),
// and calls [Guard.EnsureCurrent] before it reads or changes session
// state. Once the checkout has moved, the check fails with a *[StaleError],
// which [Guard.Middleware] answers with a retryable HTTP 409 ([Payload])
// that says whether the updater is still at work ([UpdateState]). An
// install without Git is guarded by its module file and build stamp
// ([Identity]).
//
// The guard restarts nothing by itself: a [Reloader] waits for the
// updater's success receipt, drains the guarded requests, and has the host
// load the new code.
//
// A check starts no process. On Linux, a check of an unchanged checkout
// costs one system call; elsewhere, one stat of each file the answer
// depends on. No call waits for the file system longer than
// [Options.ReadTimeout]. The repository's docs directory explains each
// part, starting with docs/usage.md.
//
// # Platform notes
//
// Only Linux watches the checkout (with inotify, on local file systems);
// elsewhere checks stat its files. Unix systems open the updater's files
// with O_NOFOLLOW and ask whether a process lives with signal 0; Windows
// uses FILE_FLAG_OPEN_REPARSE_POINT and OpenProcess; other systems never
// open the marker. [ExecHandover] needs Unix.
package runtimeguard
