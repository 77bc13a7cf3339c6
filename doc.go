// Package runtimeguard keeps a long-lived server from running code whose
// Git checkout moved under it, and proves when loading the new code is safe.
//
// A server that loaded code from a checkout (an agent written in Python,
// plugins, scripts) binds a [Guard] to the module file it loaded. Before it
// reads, creates or changes session state it calls [Guard.EnsureCurrent].
// Once the checkout's HEAD moved, or the configured module path leads to
// another file, the check fails closed with a *[StaleError] that
// [WriteStale] renders as a retryable HTTP 409 JSON payload ([Payload]),
// with what can be observed of the updater's files ([Observation]). An
// install without Git (a release directory, a Docker image, a Nix store
// path) is guarded by its module file and its build stamp (see
// [Identity]).
//
// The guard restarts nothing by itself. A host that wants the new code
// loaded without an operator runs a [Reloader], which waits for the
// updater's success receipt for the revision HEAD is at now, drains the
// guarded work, has the host load the new code and binds the guard to it
// ([Plan.Bind], or [Options.ExpectRevision] in a new process); or it
// does the same by hand with [Guard.PlanReload].
//
// Reading a revision spawns no process: HEAD, the refs, the config and the
// index are read from the files. On Linux an unchanged checkout is proven
// unchanged by one system call (an inotify watch of every file the answer
// depends on); elsewhere, and where events cannot be trusted, by one stat
// of each of those files. No check waits for the file system longer than
// [Options.ReadTimeout]: stats and reads run on a goroutine the process
// keeps for what they read (one per checkout directory, one per updater
// install, shared by every guard), one at a time, so a file system that
// stops answering costs a goroutine, not one per request or per guard,
// and the check fails closed.
//
// # The API, and why each name exists
//
// Binding and checking:
//   - [New], [Options]: make a guard, bound to the module the server loaded.
//   - [Guard]: binds, checks, answers and diagnoses; safe for concurrent use.
//   - [Guard.Capture]: bind later, for a server that loads the module lazily.
//   - [Guard.EnsureCurrent]: the check before touching session state.
//   - [Identity], [Guard.Identity]: what the guard is bound to, for logs.
//   - [Guard.Close]: release what a guard holds in the kernel, for hosts
//     that make guards dynamically.
//   - [DefaultReadTimeout], [DefaultMaxMarkerAge]: the defaults of the two
//     durations in [Options].
//
// Answering:
//   - [StaleError], [ErrStale]: the typed failure and its class.
//   - [Payload], [PayloadType]: the 409 body a client reads.
//   - [WriteStale]: write the 409 where no guard is at hand (a background
//     job storing its final state).
//   - [Guard.WriteStale], [Guard.Middleware]: write the 409 from a handler,
//     negotiating the RFC 9457 form ([Problem], [ProblemType]).
//
// Diagnosing:
//   - [Guard.Observe], [Observation]: the marker, recovery markers, receipt
//     and check path, with reasons.
//   - [Observe]: the same for an install the host could not bind.
//   - [Guard.Stats], [Stats]: counts of checks, 409s, full reads, timeouts
//     and reloads, for an operator's metrics.
//   - [MarkerState], [UpdateState]: the words of the diagnostic.
//   - [Layout], [HermesLayout]: where the updater keeps its files, for any
//     updater; Hermes's is the default.
//   - [Guard.Paths], [Paths]: the home, marker, receipt,
//     lock and install root the options resolved to, once, at New.
//
// Classifying errors:
//   - [OptionError]: a field of the options that describes no guard,
//     named, with its value and why.
//   - [ErrReadTimeout], [ErrNoModule], [ErrNotCheckout], [ErrNotReady] and
//     [errors.ErrUnsupported] (a repository format that cannot be read):
//     the classes a host acts on; [PanicError]: a read that panicked, with
//     its stack.
//
// Reloading:
//   - [NewReloader], [Reloader], [ReloaderOptions]: the whole protocol for
//     a host, in a constructor and a handler wrap ([Reloader.Wrap]).
//   - [Guard.PlanReload], [Plan]: a plan only where the receipt proves it
//     safe; [Plan.Schedule] makes the 409 say a restart is scheduled.
//   - [Plan.Bind]: bind to the new code after an in-process reload.
//   - [Guard.Changed], [Guard.Watch]: learn of a move without a request.
//   - [Receipt]: what the updater's receipt said.
//   - [DefaultProofInterval], [DefaultDrainTimeout]: the defaults of the
//     durations in [ReloaderOptions].
//
// Deploying:
//   - [Guard.LivenessHandler], [Guard.ReadinessHandler]: the probes of an
//     orchestrator or a load balancer.
//   - [Notify]: a line to the service manager (systemd's NOTIFY_SOCKET),
//     beside those a [Reloader] sends by itself.
//   - [ExecHandover], [Inherit], [Inherited]: a reload by re-executing this
//     program, keeping its pid and its listening sockets; [Inherit] also
//     takes what socket activation passes, of every kind.
//   - [GitSyncLayout]: kubernetes/git-sync as the updater, its link's flip
//     as the proof.
//
// # Platform notes
//
// On Unix systems the update marker and the receipt are opened with
// O_NONBLOCK|O_NOFOLLOW after an lstat, checked with fstat and read through
// raw system calls, and a process's liveness is asked with signal 0. Git's
// files are read the same way, following links as Git does. Linux and macOS
// also report when a process started, so a process ID reused by a newer
// process does not keep a marker active.
//
// On Windows the marker is opened with FILE_FLAG_OPEN_REPARSE_POINT and must
// be a regular disk file; liveness comes from OpenProcess and a zero-timeout
// wait, never from a signal; the updater's lock is taken with LockFileEx.
//
// Elsewhere the marker is never opened: a missing marker is absent and
// anything else unknown, and liveness is unknown.
//
// The watch path (Linux) watches only local file systems (ext4, xfs,
// btrfs, tmpfs and the like, told by statfs); a network, FUSE or overlay
// file system keeps the stat path. File stamps of the stat path use device,
// inode, size, mode, owner, group and both timestamps on Unix systems, and
// size, type and modification time elsewhere; in both cases a file too
// recent for its timestamps to prove anything is read again. The Git
// directory's objects and refs are asked access(2) again on each check, as
// git asks it. On network file systems, set [Options].Check "read".
package runtimeguard
