package updater

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxStampBytes is the largest install stamp that is read; at most one
// byte more is ever read. A stamp is a few hundred bytes.
const MaxStampBytes = 64 << 10

// updateMechanisms are the values of a stamp's updateMechanism: who
// applies the next update to the install.
var updateMechanisms = []string{"self", "electron-updater", "external"}

// ParseInstallStamp reads an install stamp (install-stamp.json, which
// Hermes's packagers write at build time: Docker, Nix, the desktop app)
// and returns the commit it names: the build of the install. It reads the
// stamp as Hermes's own reader does, strictly: UTF-8, a byte order mark
// before it allowed; one JSON object and nothing after it, no key twice;
// updateMechanism one of "self", "electron-updater" and "external"; a
// payload that is not "light" (an artifact with no agent runtime); commit
// a string that is not empty. A commit of zeros only is the placeholder
// of a build that knew none: it names no build. schemaVersion is not
// read, as Hermes's reader does not read it. The error says why the stamp
// names no build.
func ParseInstallStamp(data []byte) (string, error) {
	if len(data) > MaxStampBytes {
		return "", fmt.Errorf("over %d bytes", MaxStampBytes)
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if !utf8.Valid(data) {
		return "", errors.New("not UTF-8")
	}
	if err := strictObject(data, false); err != nil {
		return "", err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return "", fmt.Errorf("not a stamp: %w", err)
	}
	raw, ok := fields["commit"]
	if !ok {
		return "", errors.New("no commit")
	}
	var mech *string
	if err := json.Unmarshal(fields["updateMechanism"], &mech); err != nil || mech == nil {
		return "", errors.New("no updateMechanism of " + strings.Join(updateMechanisms, ", "))
	}
	if !slices.Contains(updateMechanisms, *mech) {
		return "", fmt.Errorf("updateMechanism %q is none of %s", *mech, strings.Join(updateMechanisms, ", "))
	}
	var payload any
	if p := fields["payload"]; p != nil {
		_ = json.Unmarshal(p, &payload) // valid JSON: it decodes
	}
	if payload == "light" {
		return "", errors.New(`payload "light": an artifact with no agent runtime`)
	}
	var commit *string
	if err := json.Unmarshal(raw, &commit); err != nil {
		return "", errors.New("commit is not a string")
	}
	switch {
	case commit == nil || *commit == "":
		return "", errors.New("no commit")
	case strings.Trim(*commit, "0") == "":
		return "", fmt.Errorf("commit %s is zeros only, the placeholder of a build that knew none", *commit)
	}
	return *commit, nil
}
