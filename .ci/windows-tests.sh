#!/usr/bin/env bash
# Runs the package's Windows tests on Linux under Wine: Debian's wine64
# (Wine 8) plus a bcryptprimitives.dll exporting ProcessPrng, which the Go
# runtime needs and Wine 8 lacks, built with mingw-w64.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v x86_64-w64-mingw32-gcc >/dev/null || [ ! -x /usr/lib/wine/wine64 ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wine64 gcc-mingw-w64-x86-64 >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export WINEPREFIX="$work/prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
/usr/lib/wine/wine64 wineboot --init >/dev/null 2>&1
x86_64-w64-mingw32-gcc -shared -O2 -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" .ci/wine/processprng.c -ladvapi32

# A checkout for the Windows tests to read, made here where git is.
checkout="$work/agent"
mkdir -p "$checkout"
git -C "$checkout" -c init.defaultBranch=main init -q
echo 'class AIAgent: pass' > "$checkout/run_agent.py"
git -C "$checkout" add run_agent.py
git -C "$checkout" -c user.name=ci -c user.email=ci@example.invalid commit -qm loaded
export RUNTIMEGUARD_TEST_CHECKOUT="Z:${checkout//\//\\};$(git -C "$checkout" rev-parse HEAD)"

GOOS=windows GOARCH=amd64 go test -c -o "$work/runtimeguard.test.exe" .
# The tests that need no git binary: marker reading, process probes,
# update states, payloads, parsers and their fuzz seeds.
tests='Windows|TestReadUpdateMarker|TestMarkerLiveness|TestMarkerAge|TestNoSafeOpen|TestInstallRoots|TestUpdateStateTable|TestPayload|TestWriteStale|TestPrefersProblem|TestStaleErrorText|TestStampSettled|TestDefaultMessage|TestHomeDir|TestIndexFixtures|TestParseGitConfig$|TestParseRepoFormat|TestLookupConfig|^Fuzz'
# The binary reads testdata/ relative to its working directory.
/usr/lib/wine/wine64 "$work/runtimeguard.test.exe" -test.run "$tests" -test.v 2>&1 | tee "$work/out" | grep -E '^(--- |ok|PASS|FAIL)' || true
grep -q '^PASS$' "$work/out" || { echo "Windows tests failed under Wine"; exit 1; }
wineserver -k 2>/dev/null || true
