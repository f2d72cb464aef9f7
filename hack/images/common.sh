# shellcheck shell=bash
# common.sh: shared functions for the stand-in image scripts (hack/images/<name>.sh).
#
# Contract of a stand-in script: `hack/images/<name>.sh WORKDIR` writes
# WORKDIR/rootfs.tar (the image's only layer, uncompressed) and
# WORKDIR/config.json (an image config subset: Env, Entrypoint, Cmd,
# ExposedPorts, Volumes, StopSignal, User, WorkingDir, Labels), and writes
# nothing outside WORKDIR and the cache dir. hack/images.sh turns the pair
# into an OCI layout with `imagetool build` and pushes it.
#
# Source it with:  . "$(dirname "$0")/common.sh"
# It enables `set -euo pipefail` and installs an EXIT trap that runs the
# cleanups registered with on_exit (last registered first): a script that
# needs its own cleanup must use on_exit, not `trap`.
#
# Functions (each documented where it is defined):
#   log MSG...                    progress to stderr
#   die MSG...                    error to stderr, exit 1
#   on_exit CMD...                register a cleanup
#   cache_dir                     ${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}, created
#   debian_mirror                 the Debian mirror apt uses on this host
#   base_rootfs DEST [SUITE]      Debian minbase (default trixie) extracted into DEST, cached
#   chroot_run ROOTFS CMD...      run CMD inside ROOTFS (with /proc mounted, clean env)
#   rootfs_write ROOTFS PATH [MODE]  write stdin to PATH inside ROOTFS (through chroot)
#   apt_install ROOTFS PKG...     apt-get install --no-install-recommends, no docs/locales
#   add_system_user ROOTFS NAME UID HOME  group+user NAME with uid=gid=UID, shell nologin
#   rootfs_slim ROOTFS            drop apt lists/caches, docs, man, locales, logs, build-time files
#   rootfs_tar ROOTFS OUT         a reproducible-enough tar of ROOTFS (no /dev,/proc,/sys contents)
#   rootfs_rm ROOTFS              remove a rootfs safely (refuses if anything is mounted in it)
#   human_size PATH               du -sh of PATH
#
# Pitfall: in a Debian rootfs, var/run is the absolute symlink /run, and
# other absolute symlinks exist; a host-side write through such a path lands
# in the HOST. Create or write paths inside a rootfs with chroot_run or
# rootfs_write, never with "$ROOTFS/var/run/...".

set -euo pipefail
umask 022

_SANDBOXER_CLEANUPS=()

_sandboxer_run_cleanups() {
	local rc=$? i
	for ((i = ${#_SANDBOXER_CLEANUPS[@]} - 1; i >= 0; i--)); do
		eval "${_SANDBOXER_CLEANUPS[i]}" || true
	done
	_SANDBOXER_CLEANUPS=()
	return "$rc"
}
trap _sandboxer_run_cleanups EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# log MSG... : a progress line on stderr, prefixed with the script's name.
log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }

# die MSG... : an error line on stderr, then exit 1 (cleanups run).
die() {
	log "error: $*"
	exit 1
}

# on_exit CMD... : run CMD (a shell-quoted command) when the script exits.
on_exit() {
	local q
	printf -v q '%q ' "$@"
	_SANDBOXER_CLEANUPS+=("$q")
}

# cache_dir : print (and create) the cache dir shared by every build.
cache_dir() {
	local d="${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}"
	mkdir -p "$d"
	printf '%s\n' "$d"
}

# debian_mirror : the main Debian archive URL apt uses on this host
# (SANDBOXER_DEBIAN_MIRROR overrides), read from /etc/apt/sources.list*.
debian_mirror() {
	if [[ -n "${SANDBOXER_DEBIAN_MIRROR:-}" ]]; then
		printf '%s\n' "$SANDBOXER_DEBIAN_MIRROR"
		return
	fi
	local url
	url=$(
		cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
			sed -nE -e 's/^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([a-z]+:\/\/[^[:space:]]+).*/\2/p' \
				-e 's/^[[:space:]]*URIs:[[:space:]]*([a-z]+:\/\/[^[:space:]]+).*/\1/p' |
			grep -E '/debian/?$' | head -n1
	) || true
	printf '%s\n' "${url:-http://deb.debian.org/debian}"
}

# rootfs_rm ROOTFS : rm -rf a rootfs, refusing when something is still
# mounted below it (a leftover /proc mount would otherwise be recursed into).
rootfs_rm() {
	local root="$1"
	[[ -e "$root" ]] || return 0
	root=$(readlink -f "$root")
	if awk -v r="$root" '$2 == r || index($2, r "/") == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
		die "refusing to remove $root: something is mounted below it"
	fi
	rm -rf --one-file-system "$root"
}

# base_rootfs DEST [SUITE] : extract a Debian `debootstrap --variant=minbase`
# rootfs of SUITE (default trixie) into DEST (created; must be empty). The
# first call debootstraps from debian_mirror and caches the result as
# $(cache_dir)/rootfs/debian-SUITE-minbase.tar; later calls only extract it.
# Parallel callers serialise on a lock, so one debootstrap runs at a time.
base_rootfs() {
	local dest="$1" suite="${2:-trixie}" cache tarball
	cache="$(cache_dir)/rootfs"
	mkdir -p "$cache" "$dest"
	tarball="$cache/debian-$suite-minbase.tar"
	(
		flock 9
		if [[ ! -s "$tarball" ]]; then
			local mirror tmp start=$SECONDS
			mirror=$(debian_mirror)
			tmp=$(mktemp -d "$cache/debootstrap-$suite.XXXXXX")
			log "debootstrap --variant=minbase $suite from $mirror (cached afterwards)"
			if ! debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$tmp.log" 2>&1; then
				tail -n 30 "$tmp.log" >&2
				rootfs_rm "$tmp"
				die "debootstrap $suite failed (log: $tmp.log)"
			fi
			chmod 0755 "$tmp" # mktemp -d made it 0700: it is the image's /
			rm -f "$tmp/etc/resolv.conf" "$tmp/etc/hostname"
			: >"$tmp/etc/hostname"
			tar --sort=name --numeric-owner --xattrs -C "$tmp" -cf "$tarball.tmp" .
			mv "$tarball.tmp" "$tarball"
			rootfs_rm "$tmp"
			rm -f "$tmp.log"
			log "debootstrap $suite done in $((SECONDS - start))s"
		fi
	) 9>"$cache/.debian-$suite.lock"
	tar --numeric-owner --xattrs -xpf "$tarball" -C "$dest"
	chmod 0755 "$dest"
}

# chroot_run ROOTFS CMD... : run CMD inside ROOTFS with a clean environment
# (DEBIAN_FRONTEND=noninteractive, LC_ALL=C.UTF-8) and /proc mounted for the
# duration of the call (always unmounted, even on failure).
chroot_run() {
	local root="$1" rc=0
	shift
	local mounted=
	if ! mountpoint -q "$root/proc"; then
		mount -t proc proc "$root/proc"
		mounted=1
		on_exit _umount_if_mounted "$root/proc"
	fi
	chroot "$root" /usr/bin/env -i \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 TERM=dumb \
		"$@" || rc=$?
	if [[ -n "$mounted" ]]; then
		_umount_if_mounted "$root/proc"
	fi
	return "$rc"
}

_umount_if_mounted() {
	if mountpoint -q "$1"; then
		umount "$1" || umount -l "$1"
	fi
}

# rootfs_write ROOTFS PATH [MODE] : write stdin to PATH inside ROOTFS,
# resolving symlinks inside the rootfs (through chroot), then chmod MODE
# (default 0644).
rootfs_write() {
	local root="$1" path="$2" mode="${3:-0644}"
	# shellcheck disable=SC2016 # the rootfs's sh expands it, with PATH and MODE as $1 and $2
	chroot "$root" /bin/sh -c 'mkdir -p "$(dirname "$1")" && cat >"$1" && chmod "$2" "$1"' sh "$path" "$mode"
}

# apt_install ROOTFS PKG... : install packages (no recommends) into ROOTFS.
# Docs, man pages and locales are never unpacked (dpkg path-exclude), and
# services never start (policy-rc.d exits 101). DNS comes from the host's
# resolv.conf for the duration of the build; rootfs_slim removes it.
apt_install() {
	local root="$1"
	shift
	rootfs_write "$root" /etc/dpkg/dpkg.cfg.d/90sandboxer-nodoc <<'CFG'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/lintian/*
path-exclude=/usr/share/bug/*
CFG
	rootfs_write "$root" /etc/apt/apt.conf.d/90sandboxer <<'CFG'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
Dpkg::Use-Pty "false";
quiet "2";
CFG
	rootfs_write "$root" /usr/sbin/policy-rc.d 0755 <<'CFG'
#!/bin/sh
exit 101
CFG
	rm -f "$root/etc/resolv.conf"
	cp -L /etc/resolv.conf "$root/etc/resolv.conf"
	chroot_run "$root" apt-get update
	chroot_run "$root" apt-get install -y "$@"
}

# add_system_user ROOTFS NAME UID HOME : create group NAME (gid UID) and
# system user NAME (uid UID, that group, HOME, shell /usr/sbin/nologin)
# before a package would create it with another id.
add_system_user() {
	local root="$1" name="$2" id="$3" home="$4"
	chroot_run "$root" groupadd --system --gid "$id" "$name"
	chroot_run "$root" useradd --system --uid "$id" --gid "$id" --home-dir "$home" \
		--no-create-home --shell /usr/sbin/nologin "$name"
}

# rootfs_slim ROOTFS : remove what a container never needs: apt lists and
# caches, docs, man pages, locales, logs, and the build-time files that
# apt_install added (resolv.conf, policy-rc.d).
rootfs_slim() {
	local root="$1"
	chroot_run "$root" apt-get clean
	rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
		"$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old \
		"$root"/var/log/* "$root"/tmp/* "$root"/var/tmp/* \
		"$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/lintian \
		"$root"/usr/share/bug "$root"/usr/share/common-licenses
	find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
	find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
	find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} + 2>/dev/null || true
	find "$root" -xdev -name '__pycache__' -type d -prune -exec rm -rf {} + 2>/dev/null || true
	rm -f "$root/etc/resolv.conf" "$root/usr/sbin/policy-rc.d" "$root/etc/apt/apt.conf.d/90sandboxer"
	: >"$root/etc/machine-id" 2>/dev/null || true
}

# rootfs_tar ROOTFS OUT : tar ROOTFS into OUT with sorted names, numeric
# owners and mtimes clamped to SOURCE_DATE_EPOCH (default 2025-01-01), so
# that the same tree gives the same bytes. The contents of /dev, /proc and
# /sys are left out (every runtime mounts its own); the root entry is 0755.
rootfs_tar() {
	local root="$1" out="$2"
	chmod 0755 "$root"
	local -a names
	mapfile -t names < <(cd "$root" && LC_ALL=C ls -A)
	tar --sort=name --numeric-owner --format=gnu \
		--mtime="@${SOURCE_DATE_EPOCH:-1735689600}" --clamp-mtime \
		--anchored --exclude='dev/*' --exclude='proc/*' --exclude='sys/*' \
		-C "$root" -cf "$out" "${names[@]}"
}

# human_size PATH : size of PATH as du -sh prints it.
human_size() { du -sh "$1" | cut -f1; }
