#!/usr/bin/env bash
# mariadb.sh WORKDIR : the MariaDB 11 stand-in (Debian trixie's
# mariadb-server, 11.8), shaped like the official mariadb:11 image:
# user mysql uid/gid 999, the data directory /var/lib/mysql as the one
# VOLUME, the socket in /run/mysqld, `mariadbd` as CMD listening on every
# address (Debian's build binds 127.0.0.1 only; the official image's
# config does not), no host cache or name resolution, logs on stderr, and
# an entrypoint (mariadb/docker-entrypoint.sh beside this script) that
# takes MARIADB_USER / MARIADB_PASSWORD / MARIADB_DATABASE /
# MARIADB_ROOT_PASSWORD (and _FILE, MYSQL_* aliases), initialises through a
# temporary server on the unix socket only, then starts the real one on
# TCP, switching to mysql with gosu. The mariadb client and
# mariadb-admin are on PATH.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$HERE/common.sh"

[[ $# -eq 1 ]] || die "usage: $0 WORKDIR"
work=$1
mkdir -p "$work"
root="$work/rootfs"
rootfs_rm "$root"
on_exit rootfs_rm "$root"

base_rootfs "$root" trixie

# uid/gid 999 as in the official image, made before the package would
# pick other ids (Debian's mariadb-server reuses an existing mysql user).
add_system_user "$root" mysql 999 /var/lib/mysql
apt_install "$root" mariadb-server mariadb-client gosu

version=$(chroot_run "$root" mariadbd --version)
[[ "$version" == *"11."* ]] || die "mariadbd says $version, not 11.x"
chroot_run "$root" mariadb --version >/dev/null
chroot_run "$root" mariadb-admin --version >/dev/null
chroot_run "$root" gosu --version >/dev/null

# Debian's server config binds 127.0.0.1 and writes the error log to a
# file; the official image listens on every address and logs to stderr.
# Its own docker.cnf adds host-cache-size=0 and skip-name-resolve.
# shellcheck disable=SC2016 # the rootfs's sh expands it
chroot_run "$root" sh -ec '
	for f in /etc/mysql/mariadb.conf.d/*.cnf; do
		sed -ri "s/^(bind-address|log_error|log-error)\s*=/#&/" "$f"
	done
'
rootfs_write "$root" /etc/mysql/mariadb.conf.d/05-docker.cnf <<'CNF'
[mariadb]
host-cache-size=0
skip-name-resolve
bind-address=*
CNF
# The data directory Debian's postinst initialised goes: the entrypoint
# initialises an empty one (a tmpfs) on first start, as the official
# image's does.
chroot_run "$root" sh -ec '
	rm -rf /var/lib/mysql /etc/init.d/mariadb /etc/logrotate.d/mariadb /usr/lib/systemd /etc/systemd
	install -d -o mysql -g mysql -m 0755 /var/lib/mysql
	install -d -o mysql -g mysql -m 0755 /run/mysqld
	install -d -m 0755 /docker-entrypoint-initdb.d
'
rootfs_write "$root" /usr/local/bin/docker-entrypoint.sh 0755 <"$HERE/mariadb/docker-entrypoint.sh"

rootfs_slim "$root"
rootfs_tar "$root" "$work/rootfs.tar"

cat >"$work/config.json" <<JSON
{
  "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"],
  "Entrypoint": ["docker-entrypoint.sh"],
  "Cmd": ["mariadbd"],
  "ExposedPorts": {"3306/tcp": {}},
  "Volumes": {"/var/lib/mysql": {}},
  "Labels": {
    "org.opencontainers.image.title": "sandboxer mariadb stand-in",
    "org.opencontainers.image.description": "$version (Debian trixie), shaped like mariadb:11"
  }
}
JSON
log "rootfs $(human_size "$work/rootfs.tar") ($version)"
