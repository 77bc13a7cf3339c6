#!/usr/bin/env bash
# Runs the Windows tests on Linux under Wine: Debian's wine64 (Wine 8) plus
# a bcryptprimitives.dll exporting ProcessPrng, which the Go runtime needs
# and Wine 8 lacks, built with mingw-w64.
#
# Every test of every package that builds for Windows runs: there is no
# list to keep. A test that needs what Wine lacks (a git binary, symbolic
# links) skips itself and says why; the checkout test reads one made here.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v x86_64-w64-mingw32-gcc >/dev/null || [ ! -x /usr/lib/wine/wine64 ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wine64 gcc-mingw-w64-x86-64 >/dev/null
fi

work=$(mktemp -d)
trap 'wineserver -k 2>/dev/null || true; rm -rf "$work" 2>/dev/null || true' EXIT
export WINEPREFIX="$work/prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
/usr/lib/wine/wine64 wineboot --init >/dev/null 2>&1
x86_64-w64-mingw32-gcc -shared -O2 -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" .ci/wine/processprng.c -ladvapi32

# A checkout for the tests to read, made here where git is, with git
# isolated from the user's configuration.
checkout="$work/agent"
rev=$(bash .ci/test-checkout.sh "$checkout")
export RUNTIMEGUARD_TEST_CHECKOUT="Z:${checkout//\//\\};$rev"

status=0
for pkg in $(GOOS=windows go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do
	name=$(basename "$pkg")
	dir=$(go list -f '{{.Dir}}' "$pkg")
	GOOS=windows GOARCH=amd64 go test -c -o "$work/$name.test.exe" "$pkg"
	# A test binary reads testdata/ relative to its working directory.
	echo "== $pkg"
	(cd "$dir" && /usr/lib/wine/wine64 "$work/$name.test.exe" -test.v -test.timeout 10m) >"$work/$name.out" 2>&1 || true
	if ! grep -q '^PASS$' "$work/$name.out" && grep -q -E '^wine client error|wineserver' "$work/$name.out"; then
		# Wine's own client lost its server (no test ran to an end): once
		# more, on a fresh server.
		echo "  (Wine lost its server; running again)"
		wineserver -k 2>/dev/null || true
		(cd "$dir" && /usr/lib/wine/wine64 "$work/$name.test.exe" -test.v -test.timeout 10m) >"$work/$name.out" 2>&1 || true
	fi
	grep -E '^(--- (FAIL|SKIP)|ok|PASS|FAIL)' "$work/$name.out" | sed 's/^/  /' || true
	passed=$(grep -c -- '^--- PASS' "$work/$name.out" || true)
	echo "  $passed passed"
	if ! grep -q '^PASS$' "$work/$name.out"; then
		echo "  failed under Wine:"
		# sed reads to the end: a head that stopped reading would end grep
		# with SIGPIPE, and pipefail the script, before the next package.
		grep -v -E '^\s*(=== (RUN|PAUSE|CONT|NAME)|--- (PASS|SKIP)|PASS$)' "$work/$name.out" | sed -n '1,200s/^/    /p' || true
		status=1
	fi
done
wineserver -k 2>/dev/null || true
exit $status
