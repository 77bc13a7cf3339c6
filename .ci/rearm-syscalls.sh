#!/usr/bin/env bash
# Counts the system calls of the first check after a change, as
# BenchmarkFirstCheckAfterChange makes it (a commit's files replaced, the
# refs packed; the revision kept), on the watch path and the stat path:
# the benchmark, run under strace -f with RUNTIMEGUARD_MARK set, lstats a
# marker path before and after each measured check, and the calls between
# two markers are counted, per check. Needs strace and python3. Usage:
# .ci/rearm-syscalls.sh [N]
set -euo pipefail
n=${1:-50}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/rg.test" .
for bench in commit/watch commit/stat pack-refs/watch pack-refs/stat; do
	RUNTIMEGUARD_MARK=1 strace -f -qq -o "$tmp/trace" \
		-e trace=statfs,inotify_add_watch,inotify_rm_watch,readlinkat,newfstatat,openat,read \
		"$tmp/rg.test" -test.run '^$' -test.bench "FirstCheckAfterChange/$bench\$" -test.benchtime "${n}x" >/dev/null 2>&1
	python3 - "$tmp/trace" "$bench" <<'PY'
import collections, re, sys
inside, checks, calls = False, 0, collections.Counter()
for line in open(sys.argv[1]):
    m = re.match(r'\d+\s+(\w+)\((.*)', line)
    if not m:
        continue
    call, rest = m.groups()
    if 'runtimeguard-mark-begin' in rest:
        inside, checks = True, checks + 1
    elif 'runtimeguard-mark-end' in rest:
        inside = False
    elif inside:
        calls[call] += 1
print(sys.argv[2] + ':', ', '.join('%s %.1f' % (k, v / max(checks, 1)) for k, v in sorted(calls.items())), '(%d checks)' % checks)
PY
done
