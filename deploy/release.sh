#!/usr/bin/env bash
# deploy/release.sh: `make release`. Builds the CLI as static binaries for
# linux/amd64 and linux/arm64 (CGO_ENABLED=0: nothing to link at run time,
# so one file runs on any distribution and on arm64 NAS hosts), stamped with
# the module version and the VCS revision (-buildvcs=true; `sandboxer
# version` reads them), writes SHA256SUMS beside them, then checks the
# output (deploy/release-check.sh). It builds the commit HEAD is at, from a
# clone of it (uncommitted changes are not released; and the Go toolchain
# stamps VCS information only in a checkout with a .git directory, which a
# git worktree does not have).
#
#   deploy/release.sh [DIR]     (default dist/)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dist=${1:-$root/dist}
mkdir -p "$dist"
cd "$root"
# The revision the binaries are stamped with, for the check.
SANDBOXER_RELEASE_REVISION=$(git rev-parse HEAD)
export SANDBOXER_RELEASE_REVISION
[ -z "$(git status --porcelain --untracked-files=no)" ] || echo "release: uncommitted changes are left out: building $SANDBOXER_RELEASE_REVISION"
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git clone -q --shared --no-checkout "$root" "$src"
git -C "$src" checkout -q --detach "$SANDBOXER_RELEASE_REVISION"
dist=$(cd "$dist" && pwd)
for arch in amd64 arm64; do
	start=$(date +%s)
	(cd "$src" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -buildvcs=true -trimpath -ldflags='-s -w' \
		-o "$dist/sandboxer-linux-$arch" ./cmd/sandboxer)
	echo "release: $dist/sandboxer-linux-$arch ($(($(date +%s) - start)) s)"
done
(cd "$dist" && sha256sum sandboxer-linux-amd64 sandboxer-linux-arm64 >SHA256SUMS)
echo "release: $dist/SHA256SUMS"
"$root/deploy/release-check.sh" "$dist"
