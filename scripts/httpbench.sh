#!/usr/bin/env bash
# The HTTP benchmark: requests per second of a trivial handler, bare and
# behind the guard, on loopback, under wrk (Debian: apt-get install wrk).
#
#   scripts/httpbench.sh [-rounds N] [-duration Ds] [REV]
#
# Builds internal/cmd/httpbench from the working tree and runs it: one
# server process with five ports (bare, watch, stat, stale, seed), each
# loaded by wrk with 16 connections for the duration (whole seconds,
# default 10s) in each of the rounds (default 5). See docs/performance.md
# for how to read its table.
#
# Given REV (a commit of this repository, such as main or 9cdae79), it
# also builds the same program against REV's tree and runs both servers'
# ports interleaved in the same rounds, so that "before" and "after" see
# the same machine. REV's tree is exported with git archive into a
# temporary directory (nothing in this checkout changes, no hook runs);
# where it has no internal/cmd/httpbench of its own, this tree's is copied
# in. That builds as long as REV has the names the program uses: the
# public API (New, Options, Middleware, EnsureCurrent, ErrStale, Close,
# and the stat-path switch and check path of serve.go's first two
# functions) and internal/gittest's Command. Once a tree renames them, its
# own copy of the program has the new names and is the one built.
#
# The table's server column says "before" (REV) and "after" (the working
# tree), or "tree" where there is no REV. It fails when any port answers
# other than it should (200, and 409 on the stale port).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	echo "usage: $0 [-rounds N] [-duration Ds] [REV]" >&2
	exit 2
}
flags=() rev=
while [ $# -gt 0 ]; do
	case $1 in
	-rounds | -duration) [ $# -ge 2 ] || usage; flags+=("$1" "$2"); shift 2 ;;
	-*) usage ;;
	*) [ -z "$rev" ] || usage; rev=$1; shift ;;
	esac
done
command -v wrk >/dev/null || { echo "httpbench: needs wrk (Debian: apt-get install wrk)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

servers=()
if [ -n "$rev" ]; then
	commit=$(git rev-parse --verify "$rev^{commit}")
	mkdir "$work/tree"
	git archive "$commit" | tar -x -C "$work/tree"
	if [ ! -d "$work/tree/internal/cmd/httpbench" ]; then
		mkdir -p "$work/tree/internal/cmd"
		cp -R internal/cmd/httpbench "$work/tree/internal/cmd/"
	fi
	(cd "$work/tree" && go build -o "$work/before" ./internal/cmd/httpbench)
	servers+=("before=$work/before")
	echo "before: $rev ($(git log -1 --format='%h %s' "$commit"))"
	after=after
else
	after=tree
fi
go build -o "$work/after" ./internal/cmd/httpbench
servers+=("$after=$work/after")
echo "$after: the working tree at $(git describe --always --dirty) ($(git status --porcelain | wc -l) files changed or untracked)"
"$work/after" ${flags[@]+"${flags[@]}"} "${servers[@]}"
