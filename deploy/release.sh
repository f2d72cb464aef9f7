#!/usr/bin/env bash
# deploy/release.sh: `make release`. Builds the CLI as static binaries for
# linux/amd64 and linux/arm64 (CGO_ENABLED=0: nothing to link at run time,
# so one file runs on any distribution and on arm64 NAS hosts), stamped with
# the module version and the VCS revision (-buildvcs=true; `sandboxer
# version` reads them), writes SHA256SUMS beside them, then checks the
# output (deploy/release-check.sh).
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
for arch in amd64 arm64; do
	start=$(date +%s)
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -buildvcs=true -trimpath -ldflags='-s -w' \
		-o "$dist/sandboxer-linux-$arch" ./cmd/sandboxer
	echo "release: $dist/sandboxer-linux-$arch ($(($(date +%s) - start)) s)"
done
(cd "$dist" && sha256sum sandboxer-linux-amd64 sandboxer-linux-arm64 >SHA256SUMS)
echo "release: $dist/SHA256SUMS"
"$root/deploy/release-check.sh" "$dist"
