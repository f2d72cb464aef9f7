#!/usr/bin/env bash
# hack/guest/image.sh : build (cached) the cgroup v2 guest that
# hack/guest/run.sh boots under qemu, and print its directory on stdout.
#
# The guest is Debian trixie from Debian's own packages: debootstrap, then
# apt in a chroot (systemd, linux-image-amd64, docker.io + docker-cli,
# containerd, runc, podman + crun, and what rootless Podman needs), the
# files under hack/guest/rootfs/ laid over it, a rootless user "sandboxer"
# (uid 1000, lingering, so its systemd user session and podman.socket start
# at boot; user@.service delegates cpu, cpuset, io, memory and pids), and
# an ext4 image made from the tree with `mkfs.ext4 -d` (no loop mounts).
# The kernel and initrd are copied out of the tree for qemu's -kernel and
# -initrd.
#
# Cache: ${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}/guest/<hash12>/ with
# disk.img (sparse raw ext4), vmlinuz, initrd.img, packages.txt (dpkg -l)
# and build.log; <hash> is over this script and hack/guest/rootfs/. A
# directory with its `ok` marker is reused as it is: a second run prints
# its path at once. Run.sh boots it with snapshot=on, so the cached image
# is never written to. Other hashes' directories unused for 7 days go.
#
# Env: GUEST_MIRROR (default: the host's Debian mirror, deb.debian.org),
# GUEST_SUITE (trixie), GUEST_DISK_SIZE (8G: room for images and
# containers; the file is sparse). Needs root (debootstrap, chroot).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$repo/hack/guest
cache=${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}/guest
suite=${GUEST_SUITE:-trixie}
size=${GUEST_DISK_SIZE:-8G}

log() { printf 'guest-image: %s\n' "$*" >&2; }
fail() {
	printf 'guest-image: error: %s\n' "$*" >&2
	exit 1
}

[[ $(id -u) == 0 ]] || fail "needs root (debootstrap and chroot)"
for c in debootstrap mkfs.ext4 chroot flock; do
	command -v "$c" >/dev/null || fail "$c not found (apt-get install debootstrap e2fsprogs)"
done

# The mirror the host already uses (deb822 or one-line sources), so that
# the guest comes from where the host's packages come from.
mirror=${GUEST_MIRROR:-}
if [[ -z $mirror ]]; then
	mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1 || true)
	[[ -n $mirror ]] || mirror=http://deb.debian.org/debian
fi

# The packages: what the rows need, without recommends (each one listed;
# nftables: netavark in trixie drives the firewall with nft, and rootful
# Podman fails every network setup without it).
packages=(
	systemd systemd-sysv udev dbus dbus-user-session libpam-systemd
	linux-image-amd64 initramfs-tools kmod
	iproute2 iptables nftables procps util-linux ca-certificates
	docker.io docker-cli containerd runc
	podman crun conmon netavark aardvark-dns passt slirp4netns uidmap
	fuse-overlayfs catatonit containernetworking-plugins
)

# The input hash: this script (it holds the package list and every step)
# and the overlay's files, by name and content.
hash=$(
	cd "$repo"
	{
		printf '%s\n' "$suite" "$size"
		find hack/guest/image.sh hack/guest/rootfs -type f | LC_ALL=C sort |
			while read -r f; do printf '%s %s %s\n' "$(sha256sum <"$f" | cut -d' ' -f1)" "$(stat -c %a "$f")" "$f"; done
	} | sha256sum | cut -c1-12
)
out=$cache/$hash
mkdir -p "$cache"

# One build per hash at a time (two checkouts may share the cache); the
# lock is given up when this script exits.
exec 9>"$cache/.$hash.lock"
flock -w 3600 9 || fail "another build of $out held the lock for an hour"
if [[ -f $out/ok ]]; then
	touch "$out"
	log "cached: $out"
	echo "$out"
	exit 0
fi

start=$SECONDS
work=$(mktemp -d "$cache/.build-$hash.XXXXXX")
root=$work/rootfs
mkdir -p "$root"
blog=$work/build.log
log "building $hash (suite $suite from $mirror) in $work; log: $blog"

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local rc=$?
	# The chroot's pseudo file systems go first, whatever failed: rm must
	# never walk into the host's /dev or /proc.
	for m in dev/pts dev proc sys; do
		mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"
	done
	if ((rc != 0)); then
		log "failed after $((SECONDS - start))s; last lines of $blog:"
		tail -n 30 "$blog" >&2 || true
		mkdir -p "$cache/failed" && cp "$blog" "$cache/failed/$hash.log" && log "log kept as $cache/failed/$hash.log"
	fi
	rm -rf --one-file-system "$work"
	exit "$rc"
}
trap cleanup EXIT

# step NAME SECONDS CMD... : a build step with a deadline, output to the log.
step() {
	local name=$1 secs=$2 s=$SECONDS
	shift 2
	echo "== $(date -u +%FT%TZ) $name" >>"$blog"
	timeout -k 30 "$secs" "$@" >>"$blog" 2>&1 || fail "$name failed or timed out after ${secs}s (exit $?)"
	log "$name: $((SECONDS - s))s"
}
# A command in the new tree, with a clean environment (an array, not only a
# function, so that step's timeout can run it).
in_root_cmd=(chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8)
in_root() { "${in_root_cmd[@]}" "$@"; }

step debootstrap 1800 debootstrap --variant=minbase --include=ca-certificates "$suite" "$root" "$mirror"

# No daemon starts inside the chroot (policy-rc.d), and no package asks.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
# An initrd with the virtio drivers the root disk needs (MODULES=most is
# Debian's default; said here so that a changed default cannot lose them).
mkdir -p "$root/etc/initramfs-tools/conf.d"
echo 'MODULES=most' >"$root/etc/initramfs-tools/conf.d/sandboxer"
printf 'virtio_pci\nvirtio_blk\nvirtio_net\n' >>"$root/etc/initramfs-tools/modules"

step "apt-get update" 600 "${in_root_cmd[@]}" apt-get update -q
step "apt-get install" 2400 "${in_root_cmd[@]}" apt-get install -y -q --no-install-recommends "${packages[@]}"
in_root dpkg -l >"$work/packages.txt"

# The overlay: units, the job runner, daemon and registry configuration.
cp -a "$here/rootfs/." "$root/"
chown -R 0:0 "$root/etc/systemd" "$root/usr/local/sbin" "$root/etc/docker" "$root/etc/containers"
echo sandboxer-guest >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 sandboxer-guest\n::1 localhost\n' >"$root/etc/hosts"
rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/resolv.conf"
# systemd-networkd answers DHCP from slirp; resolv.conf then names slirp's
# resolver (the guest needs none: every image comes from 10.0.2.2).
echo 'nameserver 10.0.2.3' >"$root/etc/resolv.conf"

# The rootless user: subordinate ids for its user namespace, lingering so
# that its systemd instance (and with it podman.socket) starts at boot.
in_root useradd --create-home --uid 1000 --shell /bin/bash sandboxer
grep -q '^sandboxer:' "$root/etc/subuid" || echo 'sandboxer:100000:65536' >>"$root/etc/subuid"
grep -q '^sandboxer:' "$root/etc/subgid" || echo 'sandboxer:100000:65536' >>"$root/etc/subgid"
mkdir -p "$root/var/lib/systemd/linger"
touch "$root/var/lib/systemd/linger/sandboxer"
mkdir -p "$root/etc/systemd/user/sockets.target.wants"
ln -sf /usr/lib/systemd/user/podman.socket "$root/etc/systemd/user/sockets.target.wants/podman.socket"

# Units: networkd (DHCP), the registry proxy, rootful podman.socket, the
# job runner; no getty on the serial console (run.sh reads it as a log).
{
	in_root systemctl enable systemd-networkd.service sandboxer-registry.socket \
		podman.socket sandboxer-guest.service docker.service containerd.service
	in_root systemctl mask serial-getty@ttyS0.service systemd-networkd-wait-online.service
	# Root may log in on tty0 without a password (a guest booted by hand,
	# for debugging; it has no network but slirp's).
	in_root passwd -d root
} >>"$blog" 2>&1

for m in dev/pts dev proc sys; do umount -l "$root/$m"; done
# What the image does not need: apt lists and caches.
rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin "$root/var/cache/apt/archives/"*.deb

# The kernel and initrd, for qemu -kernel/-initrd (no boot loader).
kver=$(find "$root/boot" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sed 's/^vmlinuz-//' | sort -V | tail -n 1)
[[ -n $kver && -f $root/boot/initrd.img-$kver ]] || fail "no kernel or initrd in $root/boot (linux-image-amd64 not installed?)"
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd.img"
echo "$kver" >"$work/kernel-version"

# mkfs.ext4 -d copies the tree, owners, modes and xattrs (newuidmap's file
# capabilities among them) into a new file system without mounting it.
step "mkfs.ext4 -d" 900 mkfs.ext4 -q -F -L sandboxer-guest -d "$root" "$work/disk.img" "$size"

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
mv "$work/disk.img" "$work/vmlinuz" "$work/initrd.img" "$work/kernel-version" "$work/packages.txt" "$out.tmp/"
cp "$blog" "$out.tmp/build.log"
rm -rf "$out"
mv "$out.tmp" "$out"
echo "built in $((SECONDS - start))s on $(date -u +%FT%TZ)" >"$out/ok"
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" ! -name failed ! -name '.*' -mtime +7 \
	-exec rm -rf --one-file-system {} + 2>/dev/null || true
log "built $out in $((SECONDS - start))s (disk $(du -h --apparent-size "$out/disk.img" | cut -f1) apparent, $(du -h "$out/disk.img" | cut -f1) used; kernel $kver)"
echo "$out"
