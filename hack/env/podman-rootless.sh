#!/usr/bin/env bash
# hack/env/podman-rootless.sh up|down — rootless Podman as a dev box has it:
# an unprivileged user's own `podman system service` on that user's socket,
# $XDG_RUNTIME_DIR/podman/podman.sock, for the podman-rootless test row.
#
# up (idempotent): installs Podman and what rootless Podman needs (uidmap,
#   slirp4netns, fuse-overlayfs, acl for setfacl), then makes the machine
#   what a normal Debian box already is, recording each change under
#   build/run/rootless/ so that `down` undoes exactly that:
#     - the user $SANDBOXER_ROOTLESS_USER (default sbxrootless), made with
#       useradd, which gives it subuid/subgid ranges (added with usermod
#       when an existing user has none);
#     - /dev/net/tun usable by it (slirp4netns needs it; 0666 on a normal
#       box, root-only in some VMs): an ACL entry for that user only;
#     - its XDG_RUNTIME_DIR, /run/user/<uid> (logind makes it on a normal
#       box; nothing does here);
#     - its ~/.config/containers/{containers,registries,storage}.conf: the
#       same defaults as the rootful test service (lib.sh: rlimits clamped
#       to the service's hard limits, cgroupfs, file events, netavark), the
#       loopback registry as plain HTTP, native overlay storage, so that the
#       user's own `podman` CLI sees what the service sees;
#   and starts `podman system service --time=0` AS that user (setpriv, with
#   its HOME, USER, XDG_RUNTIME_DIR, no CONTAINER_HOST) unless one answers
#   already (PID in build/run/podman-rootless.pid, log beside it).
#   Prints SANDBOXER_PODMAN_ROOTLESS_HOST=unix://... and
#   SANDBOXER_PODMAN_ROOTLESS_USER=... on stdout.
# down: stops the service if (and only if) `up` started it, and undoes the
#   recorded changes: the user's containers (podman system reset), the
#   runtime dir, the tun ACL entry, the config files, the user (userdel -r)
#   when `up` made it.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../.. source=hack/env/lib.sh
. hack/env/lib.sh

RUSER=${SANDBOXER_ROOTLESS_USER:-sbxrootless}
PIDFILE=build/run/podman-rootless.pid
LOGFILE=build/run/podman-rootless.log
# What up changed, one marker file per change.
MARKS=build/run/rootless
TUN=/dev/net/tun
CONF_HEADER="# Written by hack/env"
# The rootless service's networks live in its own network namespace: their
# addresses must not be routable from the host, as they are not on a box
# with rootless Podman alone. Its default pool (10.89.0.0/16) is the rootful
# service's too, whose bridges ARE on the host: a dial from the host to a
# rootless sandbox's address would reach a rootful container instead.
SUBNET_POOL=10.190.0.0/16

PKGS=(podman conmon runc netavark aardvark-dns golang-github-containers-common
	catatonit uidmap slirp4netns fuse-overlayfs acl curl util-linux)

uid() { id -u "$RUSER"; }
home() { getent passwd "$RUSER" | cut -d: -f6; }
rundir() { echo "/run/user/$(uid)"; }
sock() { echo "$(rundir)/podman/podman.sock"; }

# as_user CMD... runs CMD as the user, with the environment its login
# session would give it (and nothing of root's: no CONTAINER_HOST).
as_user() {
	local argv
	mapfile -t argv < <(user_argv)
	"${argv[@]}" "$@"
}

# user_argv prints, one word a line, the command prefix of as_user (for
# start_daemon, which runs a program, not a function).
user_argv() {
	printf '%s\n' setpriv --reuid="$(uid)" --regid="$(id -g "$RUSER")" --init-groups -- \
		env -i HOME="$(home)" USER="$RUSER" LOGNAME="$RUSER" PATH=/usr/local/bin:/usr/bin:/bin \
		XDG_RUNTIME_DIR="$(rundir)"
}

ensure_user() {
	if ! id "$RUSER" >/dev/null 2>&1; then
		log "podman-rootless: creating user $RUSER"
		useradd --create-home --shell /bin/bash --comment "sandboxer rootless Podman (hack/env)" "$RUSER"
		touch "$MARKS/user"
	fi
	local base=$((200000 + $(uid) * 65536))
	if ! grep -q "^$RUSER:" /etc/subuid; then
		log "podman-rootless: subuid range for $RUSER"
		usermod --add-subuids "$base-$((base + 65535))" "$RUSER"
		echo "$base-$((base + 65535))" >"$MARKS/subuid"
	fi
	if ! grep -q "^$RUSER:" /etc/subgid; then
		log "podman-rootless: subgid range for $RUSER"
		usermod --add-subgids "$base-$((base + 65535))" "$RUSER"
		echo "$base-$((base + 65535))" >"$MARKS/subgid"
	fi
}

ensure_tun() {
	if as_user test -r "$TUN" -a -w "$TUN"; then
		return 0
	fi
	log "podman-rootless: $TUN is $(stat -c '%A %U' "$TUN"): granting $RUSER rw by ACL"
	# Whether the device had an ACL of its own decides how down undoes
	# ours: drop the whole ACL, or only our entry.
	if getfacl -cps "$TUN" | grep -q .; then echo entry; else echo whole; fi >"$MARKS/tun-acl"
	setfacl -m "u:$RUSER:rw" "$TUN"
}

ensure_rundir() {
	local dir
	dir=$(rundir)
	[ -d "$dir" ] && return 0
	log "podman-rootless: creating $dir"
	[ -d /run/user ] || touch "$MARKS/rundir-parent"
	install -d -m 0700 -o "$RUSER" -g "$(id -g "$RUSER")" "$dir"
	touch "$MARKS/rundir"
}

# write_conf NOFILE NPROC writes the user's containers.conf,
# registries.conf and storage.conf, unless the user has files of its own
# there.
write_conf() {
	local dir f
	dir=$(home)/.config/containers
	as_user mkdir -p "$dir"
	for f in containers.conf registries.conf storage.conf; do
		if [ -e "$dir/$f" ] && ! head -n 1 "$dir/$f" | grep -qF "$CONF_HEADER"; then
			log "podman-rootless: $dir/$f is the user's own: left as it is"
			continue
		fi
		case $f in
		containers.conf)
			podman_containers_conf "$dir/$f" "$1" "$2" "$(rundir)/podman-events.log" "$RUSER's rootless Podman (sandboxer tests)" "$SUBNET_POOL"
			;;
		registries.conf) podman_registries_conf "$dir/$f" ;;
		storage.conf)
			# Native overlay (unprivileged since Linux 5.13): left to
			# itself, Podman 4.3 falls back to vfs here (/dev/fuse is
			# root-only, so fuse-overlayfs cannot help), which copies
			# every image layer per container.
			printf '%s: %s.\n[storage]\ndriver = "overlay"\n' "$CONF_HEADER" "$RUSER's rootless Podman storage (sandboxer tests)" >"$dir/$f"
			;;
		esac
		chown "$RUSER:" "$dir/$f"
		echo "$dir/$f" >>"$MARKS/conf"
	done
	sort -u -o "$MARKS/conf" "$MARKS/conf"
}

up() {
	need_pkgs "${PKGS[@]}"
	mkdir -p "$MARKS"
	ensure_user
	ensure_tun
	ensure_rundir
	as_user mkdir -p "$(dirname "$(sock)")"
	local argv
	mapfile -t argv < <(user_argv)
	podman_serve podman-rootless "$(sock)" "$PIDFILE" "$LOGFILE" "$(home)/.config/containers/containers.conf" write_conf \
		"${argv[@]}" podman
}

down() {
	if ! id "$RUSER" >/dev/null 2>&1; then
		rm -rf "$MARKS"
		stop_daemon "$PIDFILE" "podman-rootless service"
		return 0
	fi
	podman_unserve podman-rootless "$(sock)" "$PIDFILE"
	if [ -f "$MARKS/user" ]; then
		# Our user: what its Podman made goes with it (containers, the
		# user-namespaced storage that userdel cannot remove, the pause
		# process).
		as_user podman system reset --force >/dev/null 2>&1 || log "podman-rootless: podman system reset failed"
		stop_user_processes
	fi
	if [ -f "$MARKS/conf" ]; then
		xargs -r rm -f <"$MARKS/conf"
	fi
	[ -f "$MARKS/rundir" ] && rm -rf "$(rundir)"
	[ -f "$MARKS/rundir-parent" ] && { rmdir /run/user 2>/dev/null || true; }
	if [ -f "$MARKS/tun-acl" ]; then
		log "podman-rootless: removing $RUSER's ACL entry on $TUN"
		if [ "$(cat "$MARKS/tun-acl")" = whole ]; then
			setfacl -b "$TUN" || true
		else
			setfacl -x "u:$RUSER" "$TUN" || true
		fi
	fi
	[ -f "$MARKS/subuid" ] && usermod --del-subuids "$(cat "$MARKS/subuid")" "$RUSER"
	[ -f "$MARKS/subgid" ] && usermod --del-subgids "$(cat "$MARKS/subgid")" "$RUSER"
	if [ -f "$MARKS/user" ]; then
		log "podman-rootless: removing user $RUSER"
		userdel -r "$RUSER" 2>/dev/null || userdel "$RUSER"
	fi
	rm -rf "$MARKS"
}

# stop_user_processes stops what is left running as our user after the
# reset (Podman's pause process, late conmons), each by its PID: only
# processes of the user that `up` made.
stop_user_processes() {
	local pids
	pids=$(pgrep -u "$(uid)" | tr '\n' ' ' || true)
	[ -z "${pids// /}" ] && return 0
	log "podman-rootless: stopping $RUSER's remaining processes: $pids"
	# shellcheck disable=SC2086 # one PID per word
	kill -TERM $pids 2>/dev/null || true
	if ! wait_for "$RUSER's processes to exit" 20 sh -c "! pgrep -u $(uid) >/dev/null"; then
		pids=$(pgrep -u "$(uid)" | tr '\n' ' ' || true)
		if [ -n "${pids// /}" ]; then
			# shellcheck disable=SC2086
			kill -KILL $pids 2>/dev/null || true
		fi
	fi
}

case "${1:-up}" in
up)
	up
	echo "SANDBOXER_PODMAN_ROOTLESS_HOST=unix://$(sock)"
	echo "SANDBOXER_PODMAN_ROOTLESS_USER=$RUSER"
	;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
