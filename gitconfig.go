package runtimeguard

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	gitconfig "github.com/go-git/go-git/v5/plumbing/format/config"
)

// repoFormat is what a repository's config says about how to read it.
type repoFormat struct {
	objectFormat string // "sha1" or "sha256"
	hashLen      int    // hex digits in an object id
}

// knownExtensions are the repository extensions that do not change how HEAD,
// refs and the index are read (gitrepository-layout(5), git-config(1)).
var knownExtensions = map[string]bool{
	"noop": true, "noop-v1": true, "preciousobjects": true, "partialclone": true,
	"worktreeconfig": true, "objectformat": true, "compatobjectformat": true,
	"refstorage": true,
}

// parseRepoFormat decodes a repository config with go-git's config decoder
// (the only part of go-git this package calls: its repository and index
// readers are not used, see README "Reading Git") and checks that the
// repository is one this package can read.
func parseRepoFormat(config []byte) (repoFormat, error) {
	f := repoFormat{objectFormat: "sha1", hashLen: 40}
	if len(config) == 0 {
		return f, nil
	}
	cfg := gitconfig.New()
	if err := gitconfig.NewDecoder(bytes.NewReader(config)).Decode(cfg); err != nil {
		return f, fmt.Errorf("parse config: %w", err)
	}
	version := 0
	if v := strings.TrimSpace(cfg.Section("core").Option("repositoryformatversion")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return f, fmt.Errorf("core.repositoryformatversion %q is not a number", v)
		}
		version = n
	}
	if version > 1 {
		return f, fmt.Errorf("repository format version %d is not supported", version)
	}
	ext := cfg.Section("extensions")
	if version == 1 {
		for _, o := range ext.Options {
			if !knownExtensions[strings.ToLower(o.Key)] {
				return f, fmt.Errorf("repository extension %q is not supported", o.Key)
			}
		}
	}
	switch of := strings.ToLower(strings.TrimSpace(ext.Option("objectformat"))); of {
	case "", "sha1":
	case "sha256":
		f.objectFormat, f.hashLen = "sha256", 64
	default:
		return f, fmt.Errorf("object format %q is not supported", of)
	}
	switch rs := strings.ToLower(strings.TrimSpace(ext.Option("refstorage"))); rs {
	case "", "files":
	default:
		return f, fmt.Errorf("ref storage %q is not supported: only the files backend (loose refs and packed-refs) is read", rs)
	}
	return f, nil
}
