#!/usr/bin/env bash
# Counts the system calls of one check of an unchanged checkout: strace -f -c
# over `runtimeguard check --repeat N+1` minus the same run with --repeat 1,
# divided by N, on the watch path and on the stat path (--check stat), for a
# loose and a packed branch, and a reftable repository where git makes one
# (2.45 and later). Needs strace and git. Usage:
# .ci/syscalls.sh [N]
set -euo pipefail
n=${1:-20000}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/runtimeguard" ./cmd/runtimeguard

git_() { git -c user.name=bench -c user.email=bench@example.invalid -c init.defaultBranch=main "$@"; }
mkrepo() { # dir [git init flags]
	mkdir -p "$1" && cd "$1"
	git_ init -q "${@:2}"
	echo 'class AIAgent: pass' > run_agent.py
	git_ add run_agent.py
	git_ commit -qm loaded
	cd - >/dev/null
}
mkrepo "$tmp/loose"
mkrepo "$tmp/packed"
git_ -C "$tmp/packed" pack-refs --all
layouts=(loose packed)
if git_ init -q --ref-format=reftable "$tmp/probe" 2>/dev/null; then
	mkrepo "$tmp/reftable" --ref-format=reftable
	layouts+=(reftable)
fi
# Let the files' timestamps settle, so the checks can trust their stamps.
sleep 1

count() { # dir repeat [flags] -> per-syscall counts
	local rev dir=$1 repeat=$2
	shift 2
	rev=$(git -C "$dir" rev-parse HEAD)
	strace -f -qq -c -o "$tmp/trace" "$tmp/runtimeguard" check --module "$dir/run_agent.py" --expect "$rev" --home "$tmp" --repeat "$repeat" "$@" >/dev/null
	awk '$NF ~ /^[a-z_0-9]+$/ && $(NF-1) ~ /^[0-9]+$/ && $NF != "total" { print $NF, ($(NF-2) ~ /^[0-9]+$/ && NF == 6 ? $(NF-2) : $(NF-1)) }' "$tmp/trace" | sort
}
for path in watch stat; do
	flags=()
	[ "$path" = stat ] && flags=(--check stat)
	for layout in "${layouts[@]}"; do
		base=$(count "$tmp/$layout" 1 "${flags[@]}")
		many=$(count "$tmp/$layout" "$((n + 1))" "${flags[@]}")
		echo "== $path path, $layout: system calls per check, over $n checks"
		join -a 2 -e 0 -o 0,1.2,2.2 <(echo "$base") <(echo "$many") |
			awk -v n="$n" '{ d = $3 - $2; if (d / n >= 0.01) printf "  %-16s %8.2f\n", $1, d / n; t += d } END { printf "  %-16s %8.2f\n", "all", t / n }'
	done
done
