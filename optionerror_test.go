package runtimeguard

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryRejectedOptionIsAnOptionError: each field New rejects, of
// Options and of its Layout, comes back as an *OptionError naming that
// field, the value given and why, and the message says all three once,
// after the package's prefix.
func TestEveryRejectedOptionIsAnOptionError(t *testing.T) {
	withLayout := func(edit func(*Layout)) Options {
		l := HermesLayout
		l.RecoveryMarkers = append([]string(nil), l.RecoveryMarkers...)
		edit(&l)
		return Options{HomeDir: tempDir(t), Layout: l}
	}
	rev := strings.Repeat("a", 40)
	cases := []struct {
		opts  Options
		field string
		value any
	}{
		{Options{MaxMarkerAge: -time.Second}, "Options.MaxMarkerAge", -time.Second},
		{Options{ReadTimeout: -time.Millisecond}, "Options.ReadTimeout", -time.Millisecond},
		{Options{Check: "stats"}, "Options.Check", "stats"},
		{Options{Check: "Watch"}, "Options.Check", "Watch"},
		{Options{Message: "Update was a success"}, "Options.Message", "Update was a success"},
		{Options{ReloadMessage: "SUCCESS soon"}, "Options.ReloadMessage", "SUCCESS soon"},
		{Options{AgentName: "Successful Agent"}, "Options.AgentName", "Successful Agent"},
		{Options{ServerName: "Successor"}, "Options.ServerName", "Successor"},
		{Options{ExpectRevision: "abc", ModulePath: "x.py"}, "Options.ExpectRevision", "abc"},
		{Options{ExpectRevision: rev}, "Options.ExpectRevision", rev},
		{Options{ExpectReceipt: "update_id:1"}, "Options.ExpectReceipt", "update_id:1"},
		{Options{ExpectReceipt: "update_id:1", ExpectRevision: rev}, "Options.ExpectRevision", rev},
		// A guard that binds nothing at New could not require anything
		// of a checkout, and would say nothing.
		{Options{RequireCheckout: true}, "Options.RequireCheckout", true},
		{Options{RequireCheckout: true, HomeDir: tempDir(t), Python: "python3"}, "Options.RequireCheckout", true},
		{withLayout(func(l *Layout) { l.Marker = "" }), "Layout.Marker", ""},
		{withLayout(func(l *Layout) { l.Marker = "../marker" }), "Layout.Marker", "../marker"},
		{withLayout(func(l *Layout) { l.DefaultHome = "/abs" }), "Layout.DefaultHome", "/abs"},
		{withLayout(func(l *Layout) { l.Receipt = "../r.json" }), "Layout.Receipt", "../r.json"},
		{withLayout(func(l *Layout) { l.Lock = "../lock" }), "Layout.Lock", "../lock"},
		{withLayout(func(l *Layout) { l.ReceiptHistory = "lo*gs/update_*.json" }), "Layout.ReceiptHistory", "lo*gs/update_*.json"},
		{withLayout(func(l *Layout) { l.ReceiptHistory = "logs/update_[.json" }), "Layout.ReceiptHistory", "logs/update_[.json"},
		{withLayout(func(l *Layout) { l.Profiles = "a/b" }), "Layout.Profiles", "a/b"},
		{withLayout(func(l *Layout) { l.RecoveryMarkers = []string{"ok", "a/b"} }), "Layout.RecoveryMarkers", "a/b"},
		{withLayout(func(l *Layout) { l.RecoveryMarkers = []string{""} }), "Layout.RecoveryMarkers", ""},
		// A git-sync deployment whose --link did not reach the server is
		// not the Hermes layout.
		{Options{HomeDir: tempDir(t), Layout: GitSyncLayout("")}, "Layout.Link", ""},
	}
	for _, c := range cases {
		for name, call := range map[string]func(Options) error{
			"New":     func(o Options) error { _, err := New(o); return err },
			"Observe": func(o Options) error { _, err := Observe(o); return err },
		} {
			err := call(c.opts)
			var oe *OptionError
			if !assert.ErrorAs(t, err, &oe, "%s: %s %#v", name, c.field, c.value) {
				continue
			}
			assert.Equal(t, c.field, oe.Field, "%s: %v", name, err)
			assert.Equal(t, c.value, oe.Value, "%s: %v", name, err)
			assert.NotEmpty(t, oe.Reason, "%s: %v", name, err)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, "runtimeguard: "+c.field+" "), "%s: %q", name, msg)
			assert.Equal(t, 1, strings.Count(msg, "runtimeguard:"), "%s: the prefix once: %q", name, msg)
			assert.Contains(t, msg, oe.Reason, name)
		}
	}
}

// TestReloaderOptionErrors: the Reloader's options are named the same way.
func TestReloaderOptionErrors(t *testing.T) {
	g, err := New(Options{})
	require.NoError(t, err)
	restart := func(context.Context, *Plan) error { return nil }
	for _, c := range []struct {
		opts  ReloaderOptions
		field string
		value any
	}{
		{ReloaderOptions{Restart: restart, DrainTimeout: -time.Second}, "ReloaderOptions.DrainTimeout", -time.Second},
		{ReloaderOptions{Restart: restart, ProofInterval: -time.Second}, "ReloaderOptions.ProofInterval", -time.Second},
		{ReloaderOptions{}, "ReloaderOptions.Restart", nil},
		{ReloaderOptions{Restart: restart, Handover: restart}, "ReloaderOptions.Restart", nil},
	} {
		_, err := NewReloader(context.Background(), g, c.opts)
		var oe *OptionError
		require.ErrorAs(t, err, &oe, c.field)
		assert.Equal(t, c.field, oe.Field)
		assert.Equal(t, c.value, oe.Value)
		// The value as it is (a func has none worth printing), the field
		// and why, with the prefix once.
		want := "runtimeguard: " + c.field + " " + fmt.Sprint(c.value) + ": "
		if c.value == nil {
			want = "runtimeguard: " + c.field + ": "
		}
		assert.True(t, strings.HasPrefix(err.Error(), want), "%q", err)
		assert.Contains(t, err.Error(), oe.Reason)
	}
}

// TestOptionErrorIsNotAReadError: an error reading the checkout is no
// OptionError, so a caller can tell its configuration from its disk.
func TestOptionErrorIsNotAReadError(t *testing.T) {
	_, err := New(Options{ModulePath: filepath.Join(tempDir(t), "missing.py")})
	require.Error(t, err)
	var oe *OptionError
	assert.False(t, errors.As(err, &oe), "%v", err)
}
