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
#       Also makes sure that one iptables rule is there (see same_bridge):
#       FORWARD accepts frames bridged within one podman bridge.
# down: stops the service if (and only if) `up` started it, removes its
#       socket, and deletes that rule.
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
# containers config files, catatonit for --init, what rootless Podman
# needs (uidmap, slirp4netns, fuse-overlayfs), and OpenSSH's client for
# the adapter's ssh:// endpoints (its server: need_sshd).
PKGS=(podman conmon runc netavark aardvark-dns containernetworking-plugins
	golang-github-containers-common golang-github-containers-image
	catatonit uidmap slirp4netns fuse-overlayfs iptables curl openssh-client)

# need_sshd installs OpenSSH's server for the ssh:// endpoint test, whose
# sshd is the test's own on a loopback port: the package's maintainer
# scripts must not start a system sshd on port 22, so a policy-rc.d that
# forbids it is in place for the install (this machine kind has one
# already; one made here is removed after).
need_sshd() {
	dpkg-query -W -f='${Status}' openssh-server 2>/dev/null | grep -q 'install ok installed' && return 0
	local made=
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 0755 /usr/sbin/policy-rc.d
		made=1
	fi
	need_pkgs openssh-server
	if [ -n "$made" ]; then rm -f /usr/sbin/policy-rc.d; fi
}

# write_conf NOFILE NPROC writes the private configuration the service runs
# with (podman_containers_conf, podman_registries_conf in lib.sh).
write_conf() {
	mkdir -p "$CONF_DIR"
	podman_containers_conf "$CONF_DIR/containers.conf" "$1" "$2" "$PWD/build/run/podman-events.log" \
		"the sandboxer test service's private config"
	podman_registries_conf "$CONF_DIR/registries.conf"
}

# SAME_BRIDGE is the rule that lets containers of one internal Podman
# network reach each other on this host. Netavark 1.4 writes no firewall
# rule at all for an internal network, and here br_netfilter
# (bridge-nf-call-iptables=1, which Kubernetes needs) sends frames bridged
# between two veths of one bridge through FORWARD, whose policy Docker sets
# to DROP: without it they are dropped. It accepts only frames that stay on
# one podman bridge (physdev-is-bridged), so traffic between two networks
# and out of them is filtered as before.
SAME_BRIDGE=(FORWARD -i podman+ -m physdev --physdev-is-bridged
	-m comment --comment "sandboxer: podman same-bridge" -j ACCEPT)

# same_bridge add|del makes sure the rule is there, once, or is gone.
same_bridge() {
	case "$1" in
	add) iptables -C "${SAME_BRIDGE[@]}" 2>/dev/null || iptables -I "${SAME_BRIDGE[@]}" ;;
	del) while iptables -C "${SAME_BRIDGE[@]}" 2>/dev/null; do iptables -D "${SAME_BRIDGE[@]}"; done ;;
	esac
}

up() {
	need_pkgs "${PKGS[@]}"
	need_sshd
	same_bridge add
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
	same_bridge del
	;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
