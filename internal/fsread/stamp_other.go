//go:build !unix && !windows

package fsread

import "os"

// SafeOpens is false: this platform has no open that is both non-blocking
// and no-follow, so a read asked not to follow a link may still follow one
// swapped in after the lstat. A caller that must not be led elsewhere
// reads nothing here.
const SafeOpens = false

// finalMissing reports whether a not-exist error says only the last part
// of the path is missing: here no error tells, so the parents are asked.
func finalMissing(error) bool { return false }

// openNoFollow is os.Open: this platform has no open that does not follow
// a final link, so a link swapped in between the lstat and the open is
// followed. Callers that must not follow one, the updater's marker reads,
// do not open files here.
func openNoFollow(path string) (*os.File, error) { return os.Open(path) }

// OpenShared is os.Open: this platform has no sharing modes to set.
func OpenShared(path string) (*os.File, error) { return os.Open(path) }

// openDir opens the directory dir for a listing.
func openDir(dir string) (*os.File, error) { return os.Open(dir) }

// FileID names the file at path, whose lstat is st: this platform tells
// no file identity, so its size and modification time stand for it, and
// a write in place that changes them names another file.
func FileID(_ string, st Stamp) (string, error) { return st.FileID(), nil }
