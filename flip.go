package runtimeguard

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/runtimeguard/runtimeguard/internal/fsread"
	"github.com/runtimeguard/runtimeguard/internal/gitread"
	"github.com/runtimeguard/runtimeguard/internal/updater"
)

// flipPrefix starts the ID of the receipt a flip of the layout's link
// stands for.
const flipPrefix = "link:"

// worktreesDir is the directory of an updater's worktrees that a link may
// lead into, named by their revisions: <root>/.worktrees/<hash>.
const worktreesDir = ".worktrees"

// stampLink stamps the layout's link as it is at a binding: a flip proves
// a reload only where the link is no longer the one stamped.
func (c *config) stampLink() *updater.ReceiptFiles {
	rf := updater.ReceiptFiles{Stamps: make(map[string]fsread.Stamp)}
	st, err := fsread.LstatStamp(c.link)
	switch {
	case err != nil:
		rf.Problem = err.Error()
	case st.Present():
		rf.Stamps[c.link] = st
	}
	return &rf
}

// observeFlip reads the layout's link into o as the receipt of the update
// that flipped it since the stamps in since (nil: whatever it is now): a
// receipt of outcome success for the revision of the worktree the link is
// named after, identified by the link's file and target, with no receipt
// where the link is the one stamped. A link that does not lead to a
// worktree named by a revision is a receipt problem.
func (c *config) observeFlip(o *Observation, since *updater.ReceiptFiles) {
	o.ReceiptPath = c.link
	problem := func(why string) { o.ReceiptProblem = "the link " + c.link + " " + why }
	if since != nil && since.Problem != "" {
		problem("could not be read when the guard bound: " + since.Problem)
		return
	}
	st, err := fsread.LstatStamp(c.link)
	if err != nil {
		problem("cannot be read: " + err.Error())
		return
	}
	if since != nil {
		if old, ok := since.Stamps[c.link]; ok && old == st {
			return // the flip seen at the binding proves nothing
		}
	}
	if !st.Present() {
		problem("is missing")
		return
	}
	if !st.IsLink() {
		problem("is not a symbolic link")
		return
	}
	target, err := os.Readlink(c.link)
	if err != nil {
		problem("cannot be read: " + err.Error())
		return
	}
	if again, err := fsread.LstatStamp(c.link); err != nil || again != st {
		problem("changed while it was read")
		return
	}
	hash := filepath.Base(target)
	if filepath.Base(filepath.Dir(target)) != worktreesDir || !gitread.IsRevision(hash) {
		problem("leads to " + target + ", not to a worktree " + worktreesDir + "/<revision>")
		return
	}
	dir := target
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(c.link), dir)
	}
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		problem("leads to a worktree that cannot be resolved: " + err.Error())
		return
	}
	o.worktree = dir
	o.Receipt = &Receipt{
		ID:         flipPrefix + c.link + "@" + st.FileID() + " -> " + target,
		Outcome:    updater.OutcomeSuccess,
		To:         strings.ToLower(hash),
		FinishedAt: st.ChangedAt(),
	}
}
