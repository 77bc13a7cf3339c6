#!/usr/bin/env bash
# The module graph a user's module gains by importing runtimeguard: a
# throwaway module outside the repository imports the package, pins an old
# golang.org/x/net, and runs go mod tidy. It fails if go.sum names a module
# other than the library's (golang.org/x/sys) and its test dependency
# (testify and what it needs), or if the pinned x/net moved.
#
# Usage: .ci/consumer.sh [repository directory]
set -euo pipefail
repo=$(cd "${1:-$(dirname "$0")/..}" && pwd)
pin=v0.30.0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
cat >go.mod <<MOD
module example.com/consumer

go 1.26.0

require (
	github.com/runtimeguard/runtimeguard v0.0.0
	golang.org/x/net $pin
)

replace github.com/runtimeguard/runtimeguard => $repo
MOD
cat >main.go <<'GO'
package main

import (
	"fmt"

	"github.com/runtimeguard/runtimeguard"
	_ "golang.org/x/net/html"
)

func main() { fmt.Println(runtimeguard.ErrStale) }
GO
GOFLAGS=-mod=mod go mod tidy
go build ./...
lines=$(wc -l <go.sum)
modules=$(awk '{print $1}' go.sum | sort -u)
echo "go.sum: $lines lines, $(echo "$modules" | wc -l) modules:"
echo "$modules" | sed 's/^/  /'
net=$(go list -m -f '{{.Version}}' golang.org/x/net)
echo "golang.org/x/net: $net (pinned $pin)"
status=0
if [ "$net" != "$pin" ]; then
	echo "the pinned golang.org/x/net moved to $net"
	status=1
fi
allowed='^(golang\.org/x/sys|golang\.org/x/net|golang\.org/x/text|github\.com/stretchr/testify|github\.com/davecgh/go-spew|github\.com/pmezard/go-difflib|github\.com/stretchr/objx|gopkg\.in/yaml\.v3|go\.yaml\.in/yaml/v3|gopkg\.in/check\.v1|github\.com/kr/pretty|github\.com/kr/text|github\.com/rogpeppe/go-internal|github\.com/creack/pty)$'
extra=$(echo "$modules" | grep -Ev "$allowed" || true)
if [ -n "$extra" ]; then
	echo "go.sum names modules beyond x/sys and the test dependency:"
	echo "$extra" | sed 's/^/  /'
	status=1
fi
exit $status
