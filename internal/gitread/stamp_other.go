//go:build !unix && !windows

package gitread

// finalMissing reports whether a not-exist error says only the last part
// of the path is missing: here no error tells, so the parents are asked.
func finalMissing(error) bool { return false }
