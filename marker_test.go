package runtimeguard

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The update state is what the marker and the recovery markers add up to,
// read from real files through Observe: an unknown marker is unknown
// whatever else is there, a recovery marker makes any other state
// incomplete, and no marker is unverified.
func TestUpdateStateTable(t *testing.T) {
	for _, tc := range []struct {
		marker     MarkerState
		incomplete bool
		want       UpdateState
	}{
		{MarkerAbsent, false, UpdateUnverified},
		{MarkerActive, false, UpdateActive},
		{MarkerAbandoned, false, UpdateAbandoned},
		{MarkerUnknown, false, UpdateUnknown},
		{MarkerAbsent, true, UpdateIncomplete},
		{MarkerActive, true, UpdateIncomplete},
		{MarkerAbandoned, true, UpdateIncomplete},
		{MarkerUnknown, true, UpdateUnknown},
	} {
		t.Run(string(tc.marker)+map[bool]string{true: "+incomplete"}[tc.incomplete], func(t *testing.T) {
			tmp := tempDir(t)
			home := filepath.Join(tmp, "home")
			require.NoError(t, os.MkdirAll(home, 0o755))
			module, _ := agentRepo(t, filepath.Join(tmp, "agent"))
			g, err := New(Options{ModulePath: module, HomeDir: home})
			require.NoError(t, err)
			defer g.Close()
			marker := filepath.Join(home, hermesMarker)
			switch tc.marker {
			case MarkerActive:
				writeMarker(t, marker, os.Getpid(), time.Now())
			case MarkerAbandoned:
				writeMarker(t, marker, os.Getpid(), time.Now().Add(-time.Hour))
			case MarkerUnknown:
				writeFile(t, marker, "garbage")
			}
			if tc.incomplete {
				writeFile(t, filepath.Join(filepath.Dir(module), hermesIncomplete), "")
			}
			o := g.Observe()
			assert.Equal(t, tc.marker, o.Marker, "Observe().Marker (%s)", o.MarkerReason)
			assert.Equal(t, tc.want, o.State, "Observe().State with marker %s, incomplete %v", tc.marker, tc.incomplete)
		})
	}
}
