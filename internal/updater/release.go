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

// cachedDir is the artifacts found beside a marker while the directory's
// stamp is stamp.
type cachedDir struct {
	stamp fsread.Stamp
	names []string
	why   string
}

// markerArtifacts classifies the artifacts beside the marker at path: a
// release whose process lives is active, an artifact that proves nothing
// (or a directory that cannot be searched) unknown, and otherwise the
// answer is absent.
func (e *Env) markerArtifacts(path string) Marker {
	dir, base := filepath.Split(path)
	names, why := e.artifactNames(filepath.Clean(dir), base)
	if why != "" {
		return Marker{Unknown, "the marker's directory cannot be searched: " + why}
	}
	result := Marker{State: Absent}
	for _, name := range names {
		m := e.classifyArtifact(filepath.Join(dir, name), strings.TrimPrefix(name, base))
		switch {
		case m.State == Active:
			return m
		case m.State == Unknown && result.State != Unknown:
			result = m
		}
	}
	return result
}

// classifyArtifact judges one artifact, suffix being its name less the
// marker's.
func (e *Env) classifyArtifact(path, suffix string) Marker {
	return e.judgeArtifact(path, suffix, func() (time.Time, bool) {
		st, err := fsread.LstatStamp(path)
		if err != nil || !st.Present() {
			return time.Time{}, false
		}
		return st.ChangedAt(), true
	})
}

// judgeArtifact is classifyArtifact with the artifact's change time (the
// rename that made it) from changedAt, which reports false when the
// artifact is gone.
func (e *Env) judgeArtifact(path, suffix string, changedAt func() (time.Time, bool)) Marker {
	pid, bad := artifactPID(path, suffix)
	if bad.State != "" {
		return bad
	}
	info := e.Probe(pid)
	switch info.State {
	case ProcessGone:
		return Marker{State: Absent}
	case ProcessAlive:
		// A process that started after the rename (its change time) is
		// not the releaser: its ID was reused.
		if changed, ok := changedAt(); ok && !info.Start.IsZero() && info.Start.After(changed.Add(pidReuseSlack)) {
			return Marker{State: Absent}
		}
		return Marker{Active, fmt.Sprintf("process %d is releasing the marker (%s): the update has not finished", pid, filepath.Base(path))}
	}
	return Marker{Unknown, fmt.Sprintf("whether process %d, releasing the marker, lives cannot be told", pid)}
}

// artifactPID is the process ID a release artifact names, or the
// classification of an artifact that names none that can be asked about.
func artifactPID(path, suffix string) (int64, Marker) {
	rest, ok := strings.CutPrefix(suffix, ReleaseInfix)
	if !ok {
		return 0, Marker{Unknown, fmt.Sprintf("%s is an updater's unresolved cleanup of the marker", filepath.Base(path))}
	}
	digits, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || pid <= 0 || strings.Trim(digits, "0123456789") != "" {
		return 0, Marker{Unknown, fmt.Sprintf("%s names no process", filepath.Base(path))}
	}
	if pid > maxPID {
		return 0, Marker{Unknown, fmt.Sprintf("%s names process %d, which cannot be asked about here", filepath.Base(path), pid)}
	}
	return pid, Marker{}
}

// artifactNames lists the names in dir that start with base and the
// artifact infix, through the cache while the directory's stamp is the
// same and settled.
func (e *Env) artifactNames(dir, base string) ([]string, string) {
	st, err := fsread.LstatStamp(dir)
	if err != nil {
		return nil, err.Error()
	}
	if !st.Present() {
		return nil, ""
	}
	if e.Cache != nil {
		if names, why, ok := e.Cache.dir(dir, st); ok {
			return names, why
		}
	}
	names, why := listArtifacts(dir, base+artifactInfix)
	if e.Cache != nil && st.Settled(e.Now()) {
		if after, err := fsread.LstatStamp(dir); err == nil && after == st {
			e.Cache.rememberDir(dir, st, names, why)
		}
	}
	return names, why
}

func listArtifacts(dir, prefix string) ([]string, string) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ""
	}
	if err != nil {
		return nil, err.Error()
	}
	defer f.Close()
	names, err := readNames(f, maxMarkerDirEntries, func(n string) bool { return strings.HasPrefix(n, prefix) })
	if err != nil {
		return nil, err.Error()
	}
	return names, ""
}

// dir returns the cached artifacts of dir, when its stamp is still st.
func (c *Cache) dir(dir string, st fsread.Stamp) ([]string, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.dirs[dir]
	if !ok || d.stamp != st {
		return nil, "", false
	}
	return d.names, d.why, true
}

// rememberDir keeps the artifacts of dir, stamped st.
func (c *Cache) rememberDir(dir string, st fsread.Stamp, names []string, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs == nil || len(c.dirs) > 64 {
		c.dirs = make(map[string]cachedDir)
	}
	c.dirs[dir] = cachedDir{st, names, why}
}

// releaseName is the name a release of the marker at path by process pid
// renames it to.
func releaseName(path string, pid int) string {
	return path + ReleaseInfix + strconv.Itoa(pid) + "-" + NewUpdateID()
}
