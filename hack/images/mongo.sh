#!/usr/bin/env bash
# mongo.sh WORKDIR: the rootfs and image config of sandboxer's offline Mongo
# stand-in, honouring the parts of the official mongo:8 image's contract that
# sandboxer relies on (see mongo/docker-entrypoint.sh):
#
#   server   FerretDB (Go module, SQLite backend, CGO off), /data/db, 0.0.0.0:27017
#   auth     MONGO_INITDB_ROOT_USERNAME/PASSWORD -> a SCRAM user in admin
#   shell    the real mongosh (npm, pinned by mongo/shell/package-lock.json)
#            on Debian trixie's Node.js (mongosh 2.x needs Node >= 20.19)
#   user     starts as root like mongo:8 (a root-owned tmpfs on /data/db must
#            work), the server runs as uid/gid 999 (mongodb);
#            VOLUMEs /data/db and /data/configdb
#
# Writes WORKDIR/rootfs.tar and WORKDIR/config.json, and nothing outside
# WORKDIR but the cache (${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}/mongo):
# the FerretDB binary keyed by its version and the Go toolchain, the mongosh
# install keyed by the lockfile's hash. Needs, on the host: go, npm,
# debootstrap (via common.sh), and root (chroot).

# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin

FERRETDB_MODULE=github.com/FerretDB/FerretDB
FERRETDB_VERSION=v1.24.2

here=$(cd "$(dirname "$0")" && pwd)
assets="$here/mongo"

# build_ferretdb OUT: build FerretDB into OUT. `go install` of the module
# gives a binary that panics at start (build/version/version.txt is generated
# by FerretDB's own build, not shipped in the module), so the build runs in a
# writable copy of the module source with that file written, under the
# module's own go.mod.
build_ferretdb() {
	local out="$1" tmp dir
	tmp=$(mktemp -d "$(cache_dir)/mongo/ferretdb-build.XXXXXX")
	on_exit rm -rf "$tmp"
	dir=$(cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local \
		go mod download -json "$FERRETDB_MODULE@$FERRETDB_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	[[ -n "$dir" && -d "$dir" ]] || die "go mod download $FERRETDB_MODULE@$FERRETDB_VERSION gave no source dir"
	cp -r "$dir" "$tmp/src"
	chmod -R u+w "$tmp/src"
	printf '%s\n' "$FERRETDB_VERSION" >"$tmp/src/build/version/version.txt"
	printf '%s\n' docker >"$tmp/src/build/version/package.txt"
	log "building FerretDB $FERRETDB_VERSION (SQLite backend)"
	(cd "$tmp/src" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local \
		go build -trimpath -tags ferretdb_no_postgresql -ldflags='-s -w' -o "$tmp/ferretdb" ./cmd/ferretdb)
	[[ "$("$tmp/ferretdb" --version)" == *"version: $FERRETDB_VERSION"* ]] ||
		die "the FerretDB build does not report version $FERRETDB_VERSION"
	mv "$tmp/ferretdb" "$out"
}

# install_mongosh OUT: `npm ci` of mongo/shell into OUT (a dir that then
# holds node_modules). Pure JavaScript: optional native helpers are left out
# and no install script runs, so the host's Node version does not matter.
install_mongosh() {
	local out="$1" tmp
	command -v npm >/dev/null || die "npm is needed on the host to install mongosh (apt-get install npm)"
	tmp=$(mktemp -d "$(cache_dir)/mongo/mongosh-install.XXXXXX")
	on_exit rm -rf "$tmp"
	cp "$assets/shell/package.json" "$assets/shell/package-lock.json" "$tmp/"
	log "installing mongosh from mongo/shell/package-lock.json"
	(cd "$tmp" && npm ci --omit=optional --omit=dev --ignore-scripts --no-audit --no-fund \
		--no-update-notifier --loglevel=warn >&2)
	# Source maps and docs (~30 MB) are never loaded at run time.
	find "$tmp/node_modules" -type f \( -name '*.map' -o -name '*.md' -o -name '*.markdown' \) -delete
	mv "$tmp" "$out"
}

main() {
	local work="${1:?usage: mongo.sh WORKDIR}" cache ferretdb mongosh lock_hash root
	mkdir -p "$work"
	work=$(cd "$work" && pwd)
	cache="$(cache_dir)/mongo"
	mkdir -p "$cache"

	# Both cache fills serialise on one lock, so parallel builds share them.
	ferretdb="$cache/ferretdb-$FERRETDB_VERSION-$(GOTOOLCHAIN=local go env GOVERSION)"
	lock_hash=$(cat "$assets/shell/package.json" "$assets/shell/package-lock.json" | sha256sum | cut -c1-16)
	mongosh="$cache/mongosh-$lock_hash"
	exec 9>"$cache/.lock"
	flock 9
	[[ -x "$ferretdb" ]] || build_ferretdb "$ferretdb"
	[[ -d "$mongosh/node_modules" ]] || install_mongosh "$mongosh"
	flock -u 9
	exec 9>&-

	root="$work/rootfs"
	rootfs_rm "$root"
	on_exit rootfs_rm "$root"
	base_rootfs "$root"
	add_system_user "$root" mongodb 999 /data/db
	apt_install "$root" nodejs
	rootfs_slim "$root"

	install -m 0755 "$ferretdb" "$root/usr/local/bin/ferretdb"
	mkdir -p "$root/usr/local/lib/mongosh"
	cp -r "$mongosh/node_modules" "$root/usr/local/lib/mongosh/"
	chmod -R u=rwX,go=rX "$root/usr/local/lib/mongosh"
	install -m 0755 "$assets/mongosh" "$root/usr/local/bin/mongosh"
	install -m 0755 "$assets/docker-entrypoint.sh" "$root/usr/local/bin/docker-entrypoint.sh"
	rootfs_write "$root" /etc/mongosh.conf 0644 <"$assets/mongosh.conf"
	chroot_run "$root" install -d -m 0755 -o mongodb -g mongodb /data/db /data/configdb

	# Smoke test inside the rootfs: both programs start.
	local out
	if ! out=$(chroot_run "$root" ferretdb --version) || [[ "$out" != *"version: $FERRETDB_VERSION"* ]]; then
		die "ferretdb does not run in the rootfs"
	fi
	out=$(chroot_run "$root" mongosh --version) || die "mongosh does not run in the rootfs"
	log "mongosh $out on node $(chroot_run "$root" node --version)"

	rootfs_tar "$root" "$work/rootfs.tar"
	cat >"$work/config.json" <<JSON
{
  "Env": [
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/data/db",
    "FERRETDB_VERSION=$FERRETDB_VERSION"
  ],
  "Entrypoint": ["docker-entrypoint.sh"],
  "Cmd": ["mongod"],
  "ExposedPorts": {"27017/tcp": {}},
  "Volumes": {"/data/db": {}, "/data/configdb": {}},
  "StopSignal": "SIGTERM",
  "Labels": {
    "org.opencontainers.image.title": "sandboxer mongo stand-in",
    "org.opencontainers.image.description": "FerretDB $FERRETDB_VERSION (SQLite) with the mongo:8 entrypoint contract and the real mongosh"
  }
}
JSON
	log "mongo rootfs: $(human_size "$work/rootfs.tar")"
}

main "$@"
