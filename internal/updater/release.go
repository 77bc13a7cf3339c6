package updater

import (
	"strconv"
	"strings"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
)

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
