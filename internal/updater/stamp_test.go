package updater

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// writtenStamp is a stamp as Hermes's writer lays it out, with the fields
// given replaced ("<absent>" ones left out).
func writtenStamp(t *testing.T, with map[string]any) []byte {
	t.Helper()
	for k, v := range with {
		if v == "<absent>" {
			with[k] = gittest.Absent
		}
	}
	return []byte(gittest.Stamp("0123456789abcdef0123456789abcdef01234567", with))
}

func TestParseInstallStamp(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name string
		data func(t *testing.T) []byte
		// want is the commit, or a word of why the stamp names no build.
		want string
		ok   bool
	}{
		{"as written", func(t *testing.T) []byte { return writtenStamp(t, nil) }, commit, true},
		{"a byte order mark first", func(t *testing.T) []byte { return append([]byte("\ufeff"), writtenStamp(t, nil)...) }, commit, true},
		{"self", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"updateMechanism": "self"}) }, commit, true},
		{"electron-updater", func(t *testing.T) []byte {
			return writtenStamp(t, map[string]any{"updateMechanism": "electron-updater", "payload": "bundled"})
		}, commit, true},
		{"schema 1, not read", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"schemaVersion": 1}) }, commit, true},
		{"no schema, not read", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"schemaVersion": "<absent>"}) }, commit, true},
		{"a commit that is no object id", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"commit": "v0.19.0"}) }, "v0.19.0", true},
		{"unknown keys", func(t *testing.T) []byte {
			return writtenStamp(t, map[string]any{"runtimeDir": "..", "extra": []int{1}})
		}, commit, true},

		{"the placeholder commit", func(t *testing.T) []byte {
			return writtenStamp(t, map[string]any{"commit": strings.Repeat("0", 40), "source": "fallback"})
		}, "zeros", false},
		{"a short placeholder", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"commit": "0"}) }, "zeros", false},
		{"no commit", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"commit": "<absent>"}) }, "no commit", false},
		{"a null commit", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"commit": nil}) }, "no commit", false},
		{"an empty commit", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"commit": ""}) }, "no commit", false},
		{"a number for a commit", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"commit": 123}) }, "not a string", false},
		{"Commit spelled otherwise", func(t *testing.T) []byte {
			return writtenStamp(t, map[string]any{"commit": "<absent>", "Commit": commit})
		}, "no commit", false},
		{"no updateMechanism", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"updateMechanism": "<absent>"}) }, "updateMechanism", false},
		{"a null updateMechanism", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"updateMechanism": nil}) }, "updateMechanism", false},
		{"another updateMechanism", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"updateMechanism": "manual"}) }, "manual", false},
		{"a light payload", func(t *testing.T) []byte { return writtenStamp(t, map[string]any{"payload": "light"}) }, "light", false},
		{"a key twice", func(t *testing.T) []byte {
			return bytes.Replace(writtenStamp(t, nil), []byte("{\n"), []byte("{\n  \"commit\": \"fedcba9876543210fedcba9876543210fedcba98\",\n"), 1)
		}, "twice", false},
		{"a key twice in another case", func(t *testing.T) []byte {
			return bytes.Replace(writtenStamp(t, nil), []byte("{\n"), []byte("{\n  \"COMMIT\": \"x\",\n"), 1)
		}, "twice", false},
		{"data after the object", func(t *testing.T) []byte { return append(writtenStamp(t, nil), "{}"...) }, "after", false},
		{"an array", func(t *testing.T) []byte { return []byte(`[{"commit": "abc", "updateMechanism": "self"}]`) }, "not a JSON object", false},
		{"truncated", func(t *testing.T) []byte { d := writtenStamp(t, nil); return d[:len(d)/2] }, "not JSON", false},
		{"empty", func(t *testing.T) []byte { return nil }, "not JSON", false},
		{"not UTF-8", func(t *testing.T) []byte {
			return bytes.Replace(writtenStamp(t, nil), []byte("main"), []byte("m\xffin"), 1)
		}, "UTF-8", false},
		{"too large", func(t *testing.T) []byte {
			return writtenStamp(t, map[string]any{"pad": strings.Repeat("x", MaxStampBytes)})
		}, "over", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.data(t)
			got, err := ParseInstallStamp(data)
			if tc.ok {
				require.NoError(t, err, "ParseInstallStamp(%q)", data)
				assert.Equal(t, tc.want, got, "ParseInstallStamp(%q)", data)
				return
			}
			require.Error(t, err, "ParseInstallStamp(%q) = %q, want no build", data, got)
			assert.Empty(t, got)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// FuzzParseInstallStamp: the parser never panics, and a build it names is
// the stamp's commit, as encoding/json reads the object, beside a valid
// updateMechanism, and is not the placeholder.
func FuzzParseInstallStamp(f *testing.F) {
	f.Add([]byte(`{"schemaVersion": 2, "commit": "0123456789abcdef0123456789abcdef01234567", "source": "ci", "distribution": "docker", "updateMechanism": "external"}`))
	f.Add([]byte("\ufeff{\"commit\": \"abc\", \"updateMechanism\": \"self\", \"payload\": \"light\"}"))
	f.Add([]byte(`{"commit": "0000000000000000000000000000000000000000", "updateMechanism": "self"}`))
	f.Add([]byte(`{"commit": "a", "commit": "b", "updateMechanism": "self"}`))
	f.Add([]byte(`{"commit": 1, "updateMechanism": "electron-updater"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		commit, err := ParseInstallStamp(data)
		if err != nil {
			if commit != "" {
				t.Fatalf("ParseInstallStamp(%q) = %q with an error", data, commit)
			}
			return
		}
		if commit == "" || strings.Trim(commit, "0") == "" {
			t.Fatalf("ParseInstallStamp(%q) named the build %q", data, commit)
		}
		var fields struct {
			Commit          string `json:"commit"`
			UpdateMechanism string `json:"updateMechanism"`
		}
		if err := json.Unmarshal(bytes.TrimPrefix(data, []byte("\ufeff")), &fields); err != nil {
			t.Fatalf("ParseInstallStamp(%q) accepted what encoding/json refuses: %v", data, err)
		}
		if fields.Commit != commit {
			t.Fatalf("ParseInstallStamp(%q) = %q, want the commit %q", data, commit, fields.Commit)
		}
		switch fields.UpdateMechanism {
		case "self", "electron-updater", "external":
		default:
			t.Fatalf("ParseInstallStamp(%q) accepted the updateMechanism %q", data, fields.UpdateMechanism)
		}
	})
}
