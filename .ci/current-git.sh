#!/usr/bin/env bash
# current-git.sh DIR: install a current git (Debian unstable's) into DIR
# without touching the system, and print the directory to put first on PATH.
#
# The packages are downloaded under a private apt state (its own sources
# list for the sid suite, its own lists and cache), unpacked with dpkg -x,
# and every ELF file is pointed at the unpacked loader and libraries with
# patchelf, so the system's libc is never replaced. git runs with
# GIT_EXEC_PATH set by the wrapper this script writes (DIR/bin/git).
#
# A second run with DIR already made prints the same directory at once.
set -euo pipefail

dir=${1:?usage: current-git.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -x "$dir/bin/git" ] && "$dir/bin/git" --version >/dev/null 2>&1; then
	echo "$dir/bin"
	exit 0
fi

need() { command -v "$1" >/dev/null 2>&1; }
if ! need patchelf; then
	echo "current-git.sh: installing patchelf" >&2
	apt-get update -qq >&2 && apt-get install -y -qq patchelf >&2
fi

arch=$(dpkg --print-architecture)
case "$arch" in
amd64) triplet=x86_64-linux-gnu loader=ld-linux-x86-64.so.2 ;;
arm64) triplet=aarch64-linux-gnu loader=ld-linux-aarch64.so.1 ;;
*)
	echo "current-git.sh: no recipe for architecture $arch" >&2
	exit 1
	;;
esac

state="$dir/.apt"
rm -rf "$state" "$dir/root"
mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/debs" "$dir/root"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$keyring] http://deb.debian.org/debian sid main" >"$state/sources.list"
apt=(
	-o "Dir::Etc::SourceList=$state/sources.list"
	-o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::State::Lists=$state/lists"
	-o "Dir::Cache=$state/cache"
	-o "APT::Sandbox::User=root"
	-qq
)
apt-get "${apt[@]}" update >&2
(cd "$state/debs" && apt-get "${apt[@]}" download git libc6 libpcre2-8-0 zlib1g >&2)
for deb in "$state/debs"/*.deb; do
	dpkg -x "$deb" "$dir/root"
done

root="$dir/root"
libdir="$root/usr/lib/$triplet"
interp="$libdir/$loader"
[ -x "$interp" ] || { echo "current-git.sh: no loader at $interp" >&2; exit 1; }
# Every dynamically linked ELF file of git's: the programs in bin and
# git-core, and the libraries (the loader itself excepted).
while IFS= read -r -d '' f; do
	head -c 4 "$f" 2>/dev/null | grep -q $'\x7fELF' || continue
	[ "$f" = "$interp" ] && continue
	case "$f" in
	"$libdir"/*) patchelf --set-rpath "$libdir" "$f" 2>/dev/null || true ;;
	*)
		patchelf --print-interpreter "$f" >/dev/null 2>&1 || continue
		patchelf --set-interpreter "$interp" --set-rpath "$libdir" "$f"
		;;
	esac
done < <(find "$root/usr/bin" "$root/usr/lib/git-core" "$libdir" -type f -print0)

mkdir -p "$dir/bin"
cat >"$dir/bin/git" <<EOF
#!/bin/sh
GIT_EXEC_PATH='$root/usr/lib/git-core' exec '$root/usr/bin/git' "\$@"
EOF
chmod +x "$dir/bin/git"
"$dir/bin/git" --version >&2
echo "$dir/bin"
