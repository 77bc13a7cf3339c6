package runtimeguard

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
)

// noRevision is why a read of the checkout found no revision, as an
// error that matches [ErrNotCheckout].
func noRevision(reason string) error {
	return &classError{errors.New(cmp.Or(reason, "HEAD names no commit")), ErrNotCheckout}
}

// classed is the error format and args say, matching class too.
func classed(class error, format string, args ...any) error {
	return &classError{fmt.Errorf(format, args...), class}
}

// classWords is what class, one of the package's errors, says without the
// package's prefix: for a message that names it and has the prefix once,
// at its start, already.
func classWords(class error) string {
	return strings.TrimPrefix(class.Error(), "runtimeguard: ")
}

// inert handles a binding b of the configured path abs that found no
// revision: with [Options.RequireCheckout] or [Options.ExpectRevision] it
// is an error matching [ErrNotCheckout]; otherwise the guard takes it,
// guarding nothing, and says why once at Warn: not again for a Capture
// that finds the same module inert for the same reason.
func (g *Guard) inert(cfg *config, b *binding, abs string) error {
	why := cmp.Or(b.reason, "HEAD names no commit")
	switch {
	case cfg.expect != "":
		return classed(ErrNotCheckout, "runtimeguard: bind %s with ExpectRevision %s: %s (%s)", abs, cfg.expect, classWords(ErrNotCheckout), why)
	case cfg.requireCheckout:
		return classed(ErrNotCheckout, "runtimeguard: bind %s with RequireCheckout: %s (%s)", abs, classWords(ErrNotCheckout), why)
	}
	if old := g.bound.Load(); old != nil && old.id.Revision == "" && old.id.ModulePath == b.id.ModulePath && old.reason == b.reason {
		return nil // said already: a Capture again finds the same
	}
	cfg.log().Warn("runtimeguard: the guard guards nothing: every check passes", "module", b.id.ModulePath, "reason", why)
	return nil
}
