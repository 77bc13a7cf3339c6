// Package runtimeguard keeps a long-lived server from running code whose
// Git checkout moved under it.
//
// A server that loaded code from a checkout (an agent written in Python,
// plugins, scripts) binds a [Guard] to the module file it loaded. Before it
// reads, creates or changes session state it calls [Guard.EnsureCurrent].
// Once the checkout's HEAD moved, the check fails closed with a
// *[StaleError] that [WriteStale] renders as a retryable HTTP 409 JSON
// payload ([Payload]), together with a diagnostic of the updater's
// lifecycle markers ([UpdateState]). The guard never restarts anything: it
// tells the operator to restart manually.
//
// Reading a revision spawns no process: HEAD, the refs and the index are
// read from the files, and a check on an unchanged checkout costs one stat
// of each file the answer depends on.
//
// # Platform notes
//
// On Unix systems the update marker is opened with O_NONBLOCK|O_NOFOLLOW
// after an lstat, checked with fstat and read through raw system calls, and
// a process's liveness is asked with signal 0. Linux and macOS also report
// when a process started (to 10 ms and to the microsecond), so a process ID
// reused by a newer process does not keep a marker active.
//
// On Windows the marker is opened with FILE_FLAG_OPEN_REPARSE_POINT and must
// be a regular disk file; liveness comes from OpenProcess and a zero-timeout
// wait, never from a signal, and the start time from GetProcessTimes.
//
// Elsewhere the marker is never opened: a missing marker is absent and
// anything else unknown, and liveness is unknown.
//
// File stamps for the fast path use device, inode, size, mode and both
// timestamps on Unix systems, and size, mode and modification time
// elsewhere; in both cases a file too recent for its timestamps to prove
// anything is read again. On network file systems, set
// [Options.AlwaysRead].
package runtimeguard
