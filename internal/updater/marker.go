package updater

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

// MaxMarkerBytes is the largest update marker that is read; at most one
// byte more is ever read.
const MaxMarkerBytes = 64 << 10

// FileKind is what a safe open found at a path.
type FileKind int

// The answers of a safe open.
const (
	FileRead     FileKind = iota // a small regular file, read whole
	FileAbsent                   // nothing at the path, not even a link
	FileUnusable                 // something that proves nothing
)

// Env is the part of the environment the updater's files are read
// through, replaceable per instance so that tests can run in parallel.
type Env struct {
	Now func() time.Time
	// Open reads a small file without following links or blocking: at
	// most limit+1 bytes, a regular file only, and why not when it is not
	// one (see SafeOpen).
	Open func(path string, limit int64) (body []byte, kind FileKind, why string)
	// Probe reports whether pid is alive and when it started (see
	// ProbeProcess).
	Probe func(pid int64) ProcInfo
	// Self is the reading process as a marker names it: its ID and its
	// creation time on the updater's clock, where this platform tells it
	// (see OwnIdentity). Nil: OwnIdentity.
	Self func() Identity
	// Cache, when not nil, spares a read of an unchanged receipt or
	// marker its parse.
	Cache *Cache
}

// System is the real environment.
var System = &Env{Now: time.Now, Open: SafeOpen, Probe: ProbeProcess, Self: OwnIdentity}

// self is e.Self, or OwnIdentity where it is nil.
func (e *Env) self() Identity {
	if e.Self != nil {
		return e.Self()
	}
	return OwnIdentity()
}

// SafeOpen reads the regular file at path, at most limit+1 bytes, without
// following a final link or blocking on a FIFO or device: the one careful
// read of package fsread (lstat, a non-blocking no-follow open, the
// descriptor asked again, a read of at most its size plus one byte), in
// the updater's words. Nothing at the path is absent; a path through
// something that is not a directory, and anything but a regular file of at
// most limit bytes, proves nothing. A platform that cannot open a file both
// without blocking and without following a link (fsread.SafeOpens) never
// opens it: anything at the path proves nothing there.
func SafeOpen(path string, limit int64) ([]byte, FileKind, string) {
	if !fsread.SafeOpens {
		return lstatOnly(path, limit)
	}
	body, st, err := fsread.ReadRegular(path, limit, true)
	switch {
	case err != nil:
		return nil, FileUnusable, unusable(err, limit)
	case st.NotDir():
		return nil, FileUnusable, "lstat: not a directory"
	case !st.Present():
		return nil, FileAbsent, ""
	case st.IsDir():
		return nil, FileUnusable, "a directory"
	}
	return body, FileRead, ""
}

// lstatOnly is the open of a platform without a safe one: it never opens
// the file, so nothing at the path is absent and anything there proves
// nothing.
func lstatOnly(path string, _ int64) ([]byte, FileKind, string) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, FileAbsent, ""
	}
	return nil, FileUnusable, "present, and this platform cannot open it safely"
}

// unusable says in a few words why a read's failure proves nothing.
func unusable(err error, limit int64) string {
	var te *fsread.TypeError
	var tl *fsread.TooLargeError
	var pe *fs.PathError
	switch {
	case errors.As(err, &te):
		switch te.Kind {
		case "character device", "block device":
			return "a device"
		case "special file":
			return "not a regular file"
		}
		return "a " + te.Kind
	case errors.As(err, &tl):
		return fmt.Sprintf("over %d bytes", limit)
	case errors.Is(err, fsread.ErrChanged):
		return "changed size while it was read"
	case errors.As(err, &pe):
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// ParseMarker parses a marker body: line 1 a process ID, line 2 the Unix
// time the update started, in seconds, read as the hermes-webui guard reads
// them, with Python's int() and float() (pyInt, pyFloat), after a byte
// order mark, which the updater's own reader drops. It reports ok
// false for anything that is not UTF-8, has fewer than two lines, or holds
// a value that does not parse. Whether the values make sense is for the
// classification (Env.ClassifyMarker): pid may be any integer (clamped
// to int64), started an infinity or NaN.
func ParseMarker(body []byte) (pid int64, started float64, ok bool) {
	if len(body) > MaxMarkerBytes || !utf8.Valid(body) {
		return 0, 0, false
	}
	first, rest, found := strings.Cut(strings.TrimPrefix(string(body), "\ufeff"), "\n")
	if !found || rest == "" {
		return 0, 0, false
	}
	second, _, _ := strings.Cut(rest, "\n")
	pid, ok = pyInt(first)
	if !ok {
		return 0, 0, false
	}
	started, ok = pyFloat(second)
	if !ok {
		return 0, 0, false
	}
	return pid, started, true
}

// InstallRoots lists the directories that may hold recovery markers: the
// source directory and, for an interpreter at <root>/venv/bin/python (or
// .venv, or Scripts on Windows; names compared without case), <root>. The
// interpreter path is used as given, made absolute once by the caller (the
// guard's options are resolved at New): a venv interpreter is often a link
// to a shared one, and resolving its links would leave the install.
func InstallRoots(sourceDir, python string) []string {
	var roots []string
	add := func(dir string) {
		if dir == "" {
			return
		}
		dir = filepath.Clean(dir)
		for _, r := range roots {
			if r == dir {
				return
			}
		}
		roots = append(roots, dir)
	}
	add(sourceDir)
	if python != "" {
		bin := filepath.Dir(python)
		venv := filepath.Dir(bin)
		b, v := filepath.Base(bin), filepath.Base(venv)
		if (strings.EqualFold(b, "bin") || strings.EqualFold(b, "Scripts")) &&
			(strings.EqualFold(v, "venv") || strings.EqualFold(v, ".venv")) {
			add(filepath.Dir(venv))
		}
	}
	return roots
}

// RecoveryMarkers reports which of the recovery markers names exist in
// roots, without following links. An error other than "does not exist"
// makes the answer unknowable: it is returned, with what was found before
// it.
func RecoveryMarkers(roots, names []string) (present []string, err error) {
	for _, root := range roots {
		for _, name := range names {
			p := filepath.Join(root, name)
			_, err := os.Lstat(p)
			switch {
			case err == nil:
				present = append(present, p)
			case !errors.Is(err, fs.ErrNotExist):
				return present, err
			}
		}
	}
	return present, nil
}

// ReleaseInfix is what an updater puts between the marker's name and its
// process ID when it renames the marker aside to release it.
const ReleaseInfix = ".cas-release-"

// artifactInfix starts the name of every artifact an updater leaves beside
// its marker while it claims or releases it.
const artifactInfix = ".cas-"

// maxMarkerDirEntries bounds the entries read from the marker's directory
// to find artifacts beside the marker.
const maxMarkerDirEntries = 4096

// ReleasePID reads the name of an artifact beside the marker, suffix being
// its name less the marker's: release reports whether it is a release (the
// marker renamed aside as <marker>.cas-release-<pid>-<id>), and pid the
// process it names, zero when it names none. Any other artifact is an
// updater's cleanup left unresolved.
func ReleasePID(suffix string) (pid int64, release bool) {
	rest, ok := strings.CutPrefix(suffix, ReleaseInfix)
	if !ok {
		return 0, false
	}
	digits, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || pid <= 0 || strings.Trim(digits, "0123456789") != "" {
		return 0, true
	}
	return pid, true
}

// ListArtifacts lists the names in dir of the artifacts an updater left
// beside the marker base there (base, the artifact infix, anything),
// reading at most maxMarkerDirEntries entries; a missing directory has
// none. A directory that cannot be read says why.
func ListArtifacts(dir, base string) ([]string, string) {
	return listArtifacts(dir, base+artifactInfix)
}

func listArtifacts(dir, prefix string) ([]string, string) {
	names, err := fsread.ReadNames(dir, maxMarkerDirEntries, func(n string) bool { return strings.HasPrefix(n, prefix) })
	if err != nil {
		return nil, err.Error()
	}
	return names, ""
}

// releaseName is the name a release of the marker at path by process pid
// renames it to.
func releaseName(path string, pid int) string {
	return path + ReleaseInfix + strconv.Itoa(pid) + "-" + NewUpdateID()
}
