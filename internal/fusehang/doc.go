// Package fusehang mounts, for tests, a file system that stops answering:
// a FUSE server of its own over /dev/fuse that serves one directory of
// symbolic links (looked up, read and listed) until Hang is called, then
// never answers a request again, as an NFS mount that lost its server or
// an autofs whose daemon died. Every
// system call on a path through it blocks until the mount is torn down,
// which the test's cleanup does (the connection is aborted, so the blocked
// calls return, and the mount is detached), pass or fail.
package fusehang
