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

# write_conf NOFILE NPROC writes the private configuration the service runs
# with (podman_containers_conf, podman_registries_conf in lib.sh).
write_conf() {
	mkdir -p "$CONF_DIR"
	podman_containers_conf "$CONF_DIR/containers.conf" "$1" "$2" "$PWD/build/run/podman-events.log" \
		"the sandboxer test service's private config"
	podman_registries_conf "$CONF_DIR/registries.conf"
}

up() {
	need_pkgs "${PKGS[@]}"
	mkdir -p build/run "$(dirname "$SOCK")"
	# CONTAINER_HOST in the environment would turn the service into a
	# remote client of itself.
	podman_serve podman "$SOCK" "$PIDFILE" "$LOGFILE" "$CONF_DIR/containers.conf" write_conf \
		env -u CONTAINER_HOST -u CONTAINER_CONNECTION \
		CONTAINERS_CONF="$CONF_DIR/containers.conf" \
		CONTAINERS_REGISTRIES_CONF="$CONF_DIR/registries.conf" \
		podman
}

case "${1:-up}" in
up)
	up
	echo "CONTAINER_HOST=unix://$SOCK"
	;;
down)
	podman_unserve podman "$SOCK" "$PIDFILE"
	;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
