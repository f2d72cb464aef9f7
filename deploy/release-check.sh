#!/usr/bin/env bash
# deploy/release-check.sh DIR: checks what deploy/release.sh wrote, from the
# outside: SHA256SUMS verifies (sha256sum -c), file(1) says each binary is a
# statically linked ELF for its architecture (x86-64, ARM aarch64), and the
# binary of this host's architecture runs `sandboxer version`, which names
# the revision HEAD is at (SANDBOXER_RELEASE_REVISION: the one release.sh
# built). Exit 1 on the first failure.
set -euo pipefail

dist=${1:?usage: release-check.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "release-check: $*" >&2; exit 1; }

(cd "$dist" && sha256sum -c SHA256SUMS) || fail "SHA256SUMS does not verify"
[ "$(wc -l <"$dist/SHA256SUMS")" -eq 2 ] || fail "SHA256SUMS should list 2 binaries"
declare -A want=([amd64]="x86-64" [arm64]="ARM aarch64")
for arch in amd64 arm64; do
	desc=$(file -b "$dist/sandboxer-linux-$arch")
	echo "release-check: sandboxer-linux-$arch: $desc"
	[[ $desc == ELF\ 64-bit*"${want[$arch]}"* ]] || fail "sandboxer-linux-$arch is not an ELF for ${want[$arch]}"
	[[ $desc == *"statically linked"* ]] || fail "sandboxer-linux-$arch is not statically linked (cgo?)"
done
case $(uname -m) in
x86_64) native=amd64 ;;
aarch64) native=arm64 ;;
*) native= ;;
esac
if [ -n "$native" ]; then
	out=$("$dist/sandboxer-linux-$native" version)
	echo "release-check: $out"
	rev=${SANDBOXER_RELEASE_REVISION:-$(git -C "$root" rev-parse HEAD)}
	[[ $out == *"revision $rev"* ]] || fail "sandboxer version does not name revision $rev: $out"
	[[ $out == *"linux/$native"* ]] || fail "sandboxer version does not name linux/$native: $out"
fi
# The shipped janitor unit, pointed at the native binary, is one systemd
# accepts (systemd-analyze verify: syntax, directives, the ExecStart binary).
if [ -n "$native" ] && command -v systemd-analyze >/dev/null; then
	unitdir=$(mktemp -d)
	trap 'rm -rf "$unitdir"' EXIT
	sed "s|/usr/local/bin/sandboxer|$(cd "$dist" && pwd)/sandboxer-linux-$native|" \
		"$root/deploy/sandboxer-janitor.service" >"$unitdir/sandboxer-janitor.service"
	systemd-analyze verify "$unitdir/sandboxer-janitor.service" || fail "systemd-analyze verify rejects deploy/sandboxer-janitor.service"
	echo "release-check: deploy/sandboxer-janitor.service verifies"
fi
echo "release-check: ok"
