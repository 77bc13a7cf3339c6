// Package watch tells, in one system call, that none of the files a guard's
// answer depends on changed: one inotify descriptor per process, shared by
// every guard, watches the directories that hold them and every directory
// above, and a check asks the kernel whether an event is queued.
//
// The kernel queues an inotify event inside the rename or write that makes
// it, before that call returns, so a check that begins after a change
// returned sees it: the answer is linearizable, as a stat of every file
// is. Changes the kernel does not report by events are caught otherwise or
// not trusted: a mount placed over a watched directory is seen through
// /proc/self/mountinfo, polled in the same call; a file system whose
// changes may come from elsewhere (network and FUSE file systems, overlay
// layers, unknown types) is not watched, and its guards keep the stat path.
package watch
