#!/usr/bin/env bash
# postgres.sh WORKDIR : the PostgreSQL 17 stand-in (Debian trixie), honouring
# the official postgres image's contract: POSTGRES_USER / POSTGRES_PASSWORD /
# POSTGRES_DB (and their _FILE forms), PGDATA (default
# /var/lib/postgresql/data, may be an empty tmpfs), initdb on first start
# through a temporary server on the unix socket only, then the real server on
# '*' with a scram-sha-256 host rule, running as postgres (uid 999);
# `postgres` arguments pass through (e.g. `postgres -c fsync=off`);
# pg_isready and psql on PATH; StopSignal SIGINT.
# The entrypoint is postgres/docker-entrypoint.sh beside this script.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$HERE/common.sh"

[[ $# -eq 1 ]] || die "usage: $0 WORKDIR"
work=$1
major=17
mkdir -p "$work"
root="$work/rootfs"
rootfs_rm "$root"
on_exit rootfs_rm "$root"

base_rootfs "$root" trixie

# uid/gid 999 as in the official image, created before the package would
# pick another id.
add_system_user "$root" postgres 999 /var/lib/postgresql
chroot_run "$root" usermod --shell /bin/bash postgres

# No cluster is created at install time: the entrypoint runs initdb itself.
apt_install "$root" postgresql-common
chroot_run "$root" sed -ri 's/^#?\s*(create_main_cluster)\s*=.*$/\1 = false/' \
	/etc/postgresql-common/createcluster.conf
apt_install "$root" "postgresql-$major"

bindir=/usr/lib/postgresql/$major/bin
[[ -x "$root$bindir/postgres" ]] || die "postgresql-$major did not install $bindir/postgres"

# Listen on every address by default, as the official image does (initdb
# copies this sample into each new PGDATA).
chroot_run "$root" sed -ri "s!^#?(listen_addresses)\s*=\s*\S+.*!\1 = '*'!" \
	"/usr/share/postgresql/$major/postgresql.conf.sample"
grep -q "^listen_addresses = '\*'" "$root/usr/share/postgresql/$major/postgresql.conf.sample" ||
	die "could not set listen_addresses in postgresql.conf.sample"

# postgresql-common's /usr/bin wrappers are perl (pg_wrapper); point the
# client commands straight at the version's binaries instead, so that perl
# can go. The script runs in the rootfs's sh, with the version's bin dir as
# its $1.
# shellcheck disable=SC2016 # the rootfs's sh expands it, not this one
chroot_run "$root" sh -ec '
	bindir=$1
	for f in /usr/bin/*; do
		[ -L "$f" ] || continue
		case "$(readlink "$f")" in
		*pg_wrapper) ;;
		*) continue ;;
		esac
		name=${f##*/}
		if [ -x "$bindir/$name" ]; then
			ln -sfn "$bindir/$name" "$f"
		else
			rm -f "$f"
		fi
	done
' sh "$bindir"

# Purge what a test database never uses: JIT (LLVM, z3), perl (only
# postgresql-common's tools need it), locales data. JIT then reports
# unavailable; queries are unaffected. dpkg --force-depends because
# postgresql-17 declares these dependencies.
purge=()
# shellcheck disable=SC2016 # ${Package} is dpkg-query's format, not the shell's
for pkg in $(chroot_run "$root" dpkg-query -W -f '${Package}\n'); do
	case "$pkg" in
	libllvm* | libz3-* | perl | perl-modules-* | libperl5.* | locales | postgresql-client-common | postgresql-common | ssl-cert | libjson-perl | libcommon-sense-perl | libtypes-serialiser-perl | libjson-xs-perl)
		purge+=("$pkg")
		;;
	esac
done
if ((${#purge[@]})); then
	log "purging ${purge[*]}"
	chroot_run "$root" dpkg --purge --force-depends,remove-reinstreq "${purge[@]}"
fi
# Without LLVM the JIT provider and its bitcode are dead weight.
chroot_run "$root" sh -c "rm -rf /usr/lib/postgresql/$major/lib/bitcode /usr/lib/postgresql/$major/lib/llvmjit*"
chroot_run "$root" "$bindir/postgres" --version >/dev/null
chroot_run "$root" "$bindir/psql" --version >/dev/null

# Runtime dirs, created inside the rootfs (var/run is an absolute symlink).
chroot_run "$root" sh -ec '
	install -d -o postgres -g postgres -m 3777 /var/run/postgresql
	install -d -o postgres -g postgres -m 1777 /var/lib/postgresql/data
	install -d -m 0755 /docker-entrypoint-initdb.d
'
rootfs_write "$root" /usr/local/bin/docker-entrypoint.sh 0755 <"$HERE/postgres/docker-entrypoint.sh"
chroot_run "$root" ln -sfn usr/local/bin/docker-entrypoint.sh /docker-entrypoint.sh

version=$(chroot "$root" "$bindir/postgres" --version)
rootfs_slim "$root"
rootfs_tar "$root" "$work/rootfs.tar"

cat >"$work/config.json" <<JSON
{
  "Env": [
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$bindir",
    "LANG=C.UTF-8",
    "PG_MAJOR=$major",
    "PGDATA=/var/lib/postgresql/data"
  ],
  "Entrypoint": ["docker-entrypoint.sh"],
  "Cmd": ["postgres"],
  "ExposedPorts": {"5432/tcp": {}},
  "Volumes": {"/var/lib/postgresql/data": {}},
  "StopSignal": "SIGINT",
  "Labels": {"org.opencontainers.image.title": "sandboxer postgres $major stand-in"}
}
JSON
log "rootfs $(human_size "$work/rootfs.tar") ($version)"
