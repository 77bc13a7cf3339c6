package runtimeguard

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runtimeguard/runtimeguard/internal/gittest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noRevisionCases are the checkouts that have no current revision, each
// made from a fresh agent repository: what it does to the checkout, and
// the module path a guard would bind to.
var noRevisionCases = []struct {
	name string
	make func(t *testing.T, dir, mod string) string
	// reason is a word of why, as the guard reports it.
	reason string
}{
	{"garbage HEAD", func(t *testing.T, dir, mod string) string {
		writeFile(t, filepath.Join(dir, ".git", "HEAD"), "garbage\n")
		return mod
	}, "worktree"},
	{"deleted index", func(t *testing.T, dir, mod string) string {
		require.NoError(t, os.Remove(filepath.Join(dir, ".git", "index")))
		return mod
	}, "not tracked"},
	{"untracked module", func(t *testing.T, dir, mod string) string {
		other := filepath.Join(dir, "other.py")
		writeFile(t, other, "pass\n")
		return other
	}, "not tracked"},
	{"unborn branch", func(t *testing.T, dir, mod string) string {
		// The only ref goes, and HEAD's reflog with it: a checkout git
		// itself calls an unborn branch, not one being renamed.
		git(t, dir, "update-ref", "-d", "refs/heads/main")
		require.NoError(t, os.RemoveAll(filepath.Join(dir, ".git", "logs")))
		return mod
	}, "unborn"},
}

// mend puts HEAD and the index of the agent repository at dir back, so
// that git names a revision there again.
func mend(t *testing.T, dir, rev string) {
	writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/main\n")
	git(t, dir, "update-ref", "refs/heads/main", rev)
	git(t, dir, "read-tree", "HEAD")
}

func TestInertGuardSaysWhy(t *testing.T) {
	for _, tc := range noRevisionCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // git and a guard on a repository of its own
			dir := tempDir(t)
			mod, rev := agentRepo(t, dir)
			mod = tc.make(t, dir, mod)
			out, err := gittest.Command(dir, "rev-parse", "--verify", "-q", "HEAD").Output()
			if err == nil {
				_, err = gittest.Command(dir, "ls-files", "--error-unmatch", filepath.Base(mod)).Output()
			}
			require.Error(t, err, "git itself names no revision of a tracked module here (%s)", out)

			h := &recordHandler{}
			g, err := New(Options{ModulePath: mod, Logger: slog.New(h)})
			require.NoError(t, err, "without RequireCheckout an inert guard is no error")
			assert.Empty(t, g.Identity().Revision)
			o := g.Observe()
			assert.Contains(t, o.Unguarded, tc.reason, "the observation says why the guard guards nothing")
			require.Len(t, h.records, 1, "one log of the inert binding")
			r := h.records[0]
			assert.Equal(t, slog.LevelWarn, r.Level)
			logged := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { logged[a.Key] = a.Value.String(); return true })
			assert.Contains(t, logged["reason"], tc.reason)
			assert.Equal(t, g.Identity().ModulePath, logged["module"])
			for range 3 {
				assert.NoError(t, g.EnsureCurrent(), "an inert guard lets checks pass")
			}
			assert.Len(t, h.records, 1, "checks of an inert guard log nothing more")
			require.NoError(t, g.Capture(mod))
			assert.Len(t, h.records, 1, "a Capture that finds the same logs nothing more")

			_, err = New(Options{ModulePath: mod, RequireCheckout: true})
			require.ErrorIs(t, err, ErrNotCheckout, "RequireCheckout makes New fail")
			assert.Contains(t, err.Error(), tc.reason)
			assert.Contains(t, err.Error(), mod)

			// Mended, the checkout has a revision again; the inert guard
			// stays inert (the code it guards was loaded at none), and a
			// Capture binds it.
			mend(t, dir, rev)
			if tc.name == "untracked module" {
				git(t, dir, "add", "other.py")
				git(t, dir, "commit", "-q", "-m", "other")
				rev = strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
			}
			assert.NoError(t, g.EnsureCurrent())
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			assert.ErrorIs(t, g.Watch(ctx, 5*time.Millisecond), context.DeadlineExceeded)
			cancel()
			assert.Empty(t, g.Identity().Revision, "a mended checkout binds an inert guard neither by a check nor by Watch")
			assert.NotEmpty(t, g.Observe().Unguarded)
			require.NoError(t, g.Capture(mod))
			assert.Equal(t, rev, g.Identity().Revision, "Capture binds an inert guard anew")
			assert.Empty(t, g.Observe().Unguarded)
		})
	}
}

func TestStaleErrorSaysWhyNoRevision(t *testing.T) {
	for _, tc := range noRevisionCases {
		for _, path := range []string{"watch or stat", "read"} {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				t.Parallel() // git and a guard on a repository of its own
				dir := tempDir(t)
				mod, rev := agentRepo(t, dir)
				g, err := New(Options{ModulePath: mod, Check: map[bool]string{true: "read"}[path == "read"]})
				require.NoError(t, err)
				require.NoError(t, g.EnsureCurrent())
				if tc.name == "untracked module" {
					// The bound module itself leaves the index.
					git(t, dir, "rm", "-q", "--cached", filepath.Base(mod))
				} else {
					tc.make(t, dir, mod)
				}
				for range 2 { // the read, then the answer kept
					err = g.EnsureCurrent()
					var se *StaleError
					require.ErrorAs(t, err, &se)
					assert.Equal(t, rev, se.Captured)
					assert.Empty(t, se.Current)
					require.Error(t, se.Err, "the stale answer carries why there is no revision")
					assert.ErrorIs(t, err, ErrNotCheckout)
					assert.Contains(t, se.Err.Error(), tc.reason)
					assert.Contains(t, err.Error(), tc.reason)
					assert.NotContains(t, err.Error(), "has no revision")
					p := se.Payload()
					assert.Equal(t, Payload{Error: se.Message, Type: PayloadType, Retryable: true, AgentUpdateState: se.State}, p, "the payload is unchanged")
				}
				assert.False(t, errors.Is(err, ErrReadTimeout))
			})
		}
	}
}
