#!/usr/bin/env bash
# The HTTP benchmark: requests per second of a trivial handler, bare and
# behind the guard, on loopback, under wrk (Debian: apt-get install wrk).
#
#   internal/cmd/httpbench/httpbench.sh [-rounds N] [-duration Ds] [REV]
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
# in, and where that does not build against REV's API (the public names
# serve.go's first two functions use, and internal/gittest's Command),
# the newest version of the program in this repository's history that
# does.
#
# The table's server column says "before" (REV) and "after" (the working
# tree), or "tree" where there is no REV. It fails when any port answers
# other than it should (200, and 409 on the stale port).
set -euo pipefail
cd "$(dirname "$0")/../../.."

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
	if [ -d "$work/tree/internal/cmd/httpbench" ]; then
		(cd "$work/tree" && go build -o "$work/before" ./internal/cmd/httpbench)
	else
		# This tree's program, else the newest one of the history that
		# builds against REV's API.
		mkdir -p "$work/tree/internal/cmd"
		built=
		for from in tree $(git log --format=%H -- internal/cmd/httpbench); do
			rm -rf "$work/tree/internal/cmd/httpbench"
			if [ "$from" = tree ]; then
				cp -R internal/cmd/httpbench "$work/tree/internal/cmd/"
			else
				git archive "$from" internal/cmd/httpbench | tar -x -C "$work/tree"
			fi
			if (cd "$work/tree" && go build -o "$work/before" ./internal/cmd/httpbench 2>/dev/null); then
				built=$from
				break
			fi
		done
		[ -n "$built" ] || { echo "httpbench: no version of the program builds against $rev" >&2; exit 1; }
		[ "$built" = tree ] || echo "httpbench: $rev is built with the program of $(git log -1 --format=%h "$built")"
	fi
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
