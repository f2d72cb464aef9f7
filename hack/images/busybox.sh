#!/usr/bin/env bash
# busybox.sh WORKDIR [--volume|--pause] : the busybox stand-in, from the
# host's Debian busybox-static: /bin/busybox, a symlink per applet,
# /etc/passwd and /etc/group with root and nobody, CMD ["sh"]. With --volume
# the config also declares VOLUME /data (the busybox-volume image); with
# --pause its command sleeps forever (the pause image, the pod sandbox of the
# Kubernetes test cluster). Same rootfs.
# sandboxer-inputs: /bin/busybox
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$HERE/common.sh"

[[ $# -ge 1 && $# -le 2 ]] || die "usage: $0 WORKDIR [--volume|--pause]"
work=$1
volume=
cmd='["sh"]'
title="sandboxer busybox stand-in"
case "${2:-}" in
"") ;;
--volume) volume=1 ;;
--pause)
	cmd='["sleep", "infinity"]'
	title="sandboxer pause stand-in"
	;;
*) die "unknown option $2" ;;
esac

bb=/bin/busybox
dpkg-query -S "$bb" 2>/dev/null | grep -q '^busybox-static:' ||
	die "$bb is not Debian's busybox-static (apt-get install busybox-static)"

mkdir -p "$work"
root="$work/rootfs"
rootfs_rm "$root"
mkdir -p "$root"
on_exit rootfs_rm "$root"

mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,home,proc,sys,dev,run,var/tmp}
install -d -m 1777 "$root/tmp"
chmod 1777 "$root/var/tmp"
chmod 0700 "$root/root"
install -m 0755 "$bb" "$root/bin/busybox"
while read -r applet; do
	[[ "$applet" == */* && "$applet" != bin/busybox ]] || continue
	mkdir -p "$root/$(dirname "$applet")"
	ln -sf /bin/busybox "$root/$applet"
done < <("$bb" --list-full)

cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >"$root/etc/group" <<'GROUP'
root:x:0:
nobody:x:65534:
GROUP
: >"$root/etc/hostname"

rootfs_tar "$root" "$work/rootfs.tar"

volumes=
[[ -n "$volume" ]] && volumes='
  "Volumes": {"/data": {}},'
cat >"$work/config.json" <<JSON
{
  "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],$volumes
  "Cmd": $cmd,
  "Labels": {"org.opencontainers.image.title": "$title"}
}
JSON
log "rootfs $(human_size "$work/rootfs.tar") ($("$bb" | head -n1 | cut -d' ' -f1-2))"
