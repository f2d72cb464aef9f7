#!/usr/bin/env bash
# redis.sh WORKDIR : the Redis 8 stand-in (Debian trixie's redis-server),
# honouring the official redis image's contract: `redis-server` as CMD and
# any `redis-server ARGS` as the container command (e.g.
# `redis-server --requirepass X --save '' --appendonly no`), protected mode
# off by default (the official image builds it off; Debian's build has it
# on), runs as the non-root redis user (uid 999), WorkingDir and VOLUME
# /data, redis-cli on PATH.
# The entrypoint is redis/docker-entrypoint.sh beside this script.
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

# uid/gid 999 as in the official image, created before the package would
# pick another id (Debian's package reuses an existing redis user).
add_system_user "$root" redis 999 /var/lib/redis
apt_install "$root" redis-server redis-tools

chroot_run "$root" redis-server --version >/dev/null
chroot_run "$root" redis-cli --version >/dev/null
version=$(chroot "$root" redis-server --version)

# Debian's /etc/redis/redis.conf daemonizes and logs to a file: it is not
# the official image's "no config file" default, so it goes, with its
# service leftovers.
chroot_run "$root" rm -rf /etc/redis /etc/init.d/redis-server /etc/logrotate.d/redis-server \
	/usr/lib/systemd /etc/systemd
chroot_run "$root" sh -ec '
	install -d -o redis -g redis -m 0755 /data
	install -d -o redis -g redis -m 0750 /var/lib/redis
'
rootfs_write "$root" /usr/local/bin/docker-entrypoint.sh 0755 <"$HERE/redis/docker-entrypoint.sh"

rootfs_slim "$root"
rootfs_tar "$root" "$work/rootfs.tar"

cat >"$work/config.json" <<'JSON'
{
  "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
  "Entrypoint": ["docker-entrypoint.sh"],
  "Cmd": ["redis-server"],
  "ExposedPorts": {"6379/tcp": {}},
  "Volumes": {"/data": {}},
  "WorkingDir": "/data",
  "Labels": {"org.opencontainers.image.title": "sandboxer redis stand-in"}
}
JSON
log "rootfs $(human_size "$work/rootfs.tar") ($version)"
