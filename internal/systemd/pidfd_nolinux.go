//go:build unix && !linux

package systemd

// ownPidfdID is false: no pidfd tells this process apart here.
func ownPidfdID() (uint64, bool) { return 0, false }
