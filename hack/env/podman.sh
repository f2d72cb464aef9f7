#!/usr/bin/env bash
# hack/env/podman.sh up|down — make rootful Podman's libpod API answer for the
# tests, on a private socket that never collides with a system service.
#
# up:   installs Podman (Debian's 4.3.1) and what it needs if missing; when
#       nothing answers on the socket, writes a private containers.conf
#       (default rlimits = the service's own hard limits, cgroupfs, file
#       events, netavark) and registries.conf (127.0.0.1/localhost registries
#       are plain HTTP) under build/podman/, starts
#       `podman system service --time=0 unix:///run/sandboxer/podman.sock`
#       (PID in build/run/podman.pid so that `down` stops only what `up`
#       started; log in build/run/podman.log), and waits for /_ping.
#       Prints CONTAINER_HOST=... on stdout.
# down: stops the service if (and only if) `up` started it, and removes its
#       socket.
# Idempotent; logs go to stderr, stdout carries KEY=VALUE lines only.
# SANDBOXER_PODMAN_SOCK overrides the socket path.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../.. source=hack/env/lib.sh
. hack/env/lib.sh

SOCK=${SANDBOXER_PODMAN_SOCK:-/run/sandboxer/podman.sock}
PIDFILE=build/run/podman.pid
LOGFILE=build/run/podman.log
CONF_DIR=$PWD/build/podman

# Debian 12 packages: Podman with its OCI runtime and monitor, the netavark
# network backend with its DNS server (CNI plugins as the fallback backend), the shared
# containers config files, catatonit for --init, and what rootless Podman
# needs (uidmap, slirp4netns, fuse-overlayfs).
PKGS=(podman conmon runc netavark aardvark-dns containernetworking-plugins
	golang-github-containers-common golang-github-containers-image
	catatonit uidmap slirp4netns fuse-overlayfs iptables curl)

answers() {
	[ -S "$SOCK" ] && curl -fsS --max-time 2 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1
}

# ours reports whether the PID file names a live `podman system service` on
# our socket (a PID reused by another process after a reboot is not ours).
ours() {
	local pid
	[ -f "$PIDFILE" ] || return 1
	pid=$(cat "$PIDFILE")
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "system service --time=0 unix://$SOCK"
}

# hard_limit PID NAME prints the hard limit NAME ("open files", "processes")
# of process PID.
hard_limit() {
	awk -v n="Max $2" 'index($0, n) == 1 { print $(NF - 1) }' "/proc/$1/limits"
}

# write_conf NOFILE NPROC writes the private configuration the service runs
# with. The service cannot raise rlimits past its own hard limits (no
# CAP_SYS_RESOURCE in some VMs), and Podman's default (1048576) would then
# fail every start: containers default to the service's hard limits.
write_conf() {
	local nofile=$1 nproc=$2 reg
	mkdir -p "$CONF_DIR"
	cat >"$CONF_DIR/containers.conf.tmp" <<EOF
# Written by hack/env/podman.sh: the sandboxer test service's private config.
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]
log_driver = "k8s-file"

[engine]
cgroup_manager = "cgroupfs"
# Each API exec leaves its conmon (two processes) alive this long after the
# exit, so that a client can still read the exit code (default 300 s):
# sandboxer reads it at once, and readiness probes exec often.
exit_command_delay = 15
events_logger = "file"
events_logfile_path = "$PWD/build/run/podman-events.log"

[network]
network_backend = "netavark"
EOF
	mv "$CONF_DIR/containers.conf.tmp" "$CONF_DIR/containers.conf"
	# A location without a port also matches host:port refs (containers/image
	# prefix matching); the known loopback registry is listed as well.
	cat >"$CONF_DIR/registries.conf.tmp" <<'EOF'
# Written by hack/env/podman.sh: the loopback stand-in registry is plain HTTP.
unqualified-search-registries = ["docker.io"]

[[registry]]
location = "127.0.0.1"
insecure = true

[[registry]]
location = "localhost"
insecure = true
EOF
	for reg in ${SANDBOXER_REGISTRY:-} $(sed -n 's/^SANDBOXER_REGISTRY=//p' build/images.env 2>/dev/null | tr -d "\"'"); do
		case "$reg" in 127.* | localhost*) ;; *) continue ;; esac
		grep -qF "location = \"$reg\"" "$CONF_DIR/registries.conf.tmp" && continue
		printf '\n[[registry]]\nlocation = "%s"\ninsecure = true\n' "$reg" >>"$CONF_DIR/registries.conf.tmp"
	done
	mv "$CONF_DIR/registries.conf.tmp" "$CONF_DIR/registries.conf"
}

start() {
	mkdir -p build/run "$(dirname "$SOCK")"
	rm -f "$SOCK"
	log "podman: starting podman system service on $SOCK"
	# CONTAINER_HOST in the environment would turn the service into a
	# remote client of itself.
	start_daemon "$PIDFILE" "$LOGFILE" env -u CONTAINER_HOST -u CONTAINER_CONNECTION \
		CONTAINERS_CONF="$CONF_DIR/containers.conf" \
		CONTAINERS_REGISTRIES_CONF="$CONF_DIR/registries.conf" \
		podman system service --time=0 "unix://$SOCK"
	wait_for "podman on $SOCK" 60 answers || { tail -n 30 "$LOGFILE" >&2; exit 1; }
}

up() {
	local nofile nproc pid
	need_pkgs "${PKGS[@]}"
	if answers; then
		if ours; then
			log "podman: already answering on $SOCK (started by us, pid $(cat "$PIDFILE"))"
		else
			log "podman: already answering on $SOCK (not started by us)"
		fi
		return 0
	fi
	if ours; then
		stop_daemon "$PIDFILE" "podman service (not answering)"
	fi
	rm -f "$PIDFILE"
	nofile=$(ulimit -Hn)
	nproc=$(ulimit -Hu)
	[ "$nofile" = unlimited ] && nofile=1048576
	[ "$nproc" = unlimited ] && nproc=4194304
	write_conf "$nofile" "$nproc"
	start
	# Podman lowers some of its own limits at start-up (4.3.1 here: nproc
	# 32768): what containers may ask for is what the running service has.
	pid=$(cat "$PIDFILE")
	nofile=$(hard_limit "$pid" "open files")
	nproc=$(hard_limit "$pid" "processes")
	[ "$nofile" = unlimited ] && nofile=1048576
	[ "$nproc" = unlimited ] && nproc=4194304
	if ! grep -qF "\"nofile=${nofile}:${nofile}\", \"nproc=${nproc}:${nproc}\"" "$CONF_DIR/containers.conf"; then
		log "podman: service limits are nofile=$nofile nproc=$nproc: restarting with them as defaults"
		stop_daemon "$PIDFILE" "podman service"
		write_conf "$nofile" "$nproc"
		start
	fi
	log "podman: answering on $SOCK (pid $(cat "$PIDFILE"), default ulimits nofile=$nofile nproc=$nproc)"
}

case "${1:-up}" in
up)
	up
	echo "CONTAINER_HOST=unix://$SOCK"
	;;
down)
	if [ -f "$PIDFILE" ] && ! ours; then
		log "podman: $PIDFILE names no service of ours (stale), removing it"
		rm -f "$PIDFILE"
	fi
	stop_daemon "$PIDFILE" "podman service"
	# Only our own socket: a service we did not start keeps its socket.
	answers || rm -f "$SOCK"
	;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
