// Package demorepo makes the throwaway checkouts of the demo and the
// examples with go-git: they need no git binary and read no Git
// configuration of the user's.
package demorepo

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a repository with a worktree.
type Repo struct {
	dir  string
	repo *gogit.Repository
}

// Open opens the repository in dir, making one if there is none.
func Open(dir string) (*Repo, error) {
	r, err := gogit.PlainInit(dir, false)
	if errors.Is(err, gogit.ErrRepositoryAlreadyExists) {
		r, err = gogit.PlainOpen(dir)
	}
	if err != nil {
		return nil, err
	}
	return &Repo{dir: dir, repo: r}, nil
}

// Commit writes content to the file name (relative to the worktree),
// commits it with msg, and returns the new commit's id.
func (r *Repo) Commit(name, content, msg string) (string, error) {
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644); err != nil {
		return "", err
	}
	wt, err := r.repo.Worktree()
	if err != nil {
		return "", err
	}
	if _, err := wt.Add(filepath.ToSlash(name)); err != nil {
		return "", err
	}
	sig := &object.Signature{Name: "runtimeguard demo", Email: "demo@example.invalid", When: time.Now()}
	h, err := wt.Commit(msg, &gogit.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true})
	if err != nil {
		return "", err
	}
	return h.String(), nil
}
