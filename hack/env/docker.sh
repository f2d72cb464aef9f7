#!/usr/bin/env bash
# hack/env/docker.sh up|down — make Docker answer for the tests.
#
# up:   installs docker.io if dockerd is missing, starts dockerd when nothing
#       answers on the default socket (recording its PID in build/run so that
#       `down` stops only what `up` started), waits until it answers and
#       prints DOCKER_HOST=... on stdout.
# down: stops dockerd if (and only if) `up` started it.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../.. source=hack/env/lib.sh
. hack/env/lib.sh

SOCK=/var/run/docker.sock
PIDFILE=build/run/dockerd.pid

answers() { docker -H "unix://$SOCK" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

case "${1:-up}" in
up)
	# With recommends, as verified on this machine kind (cgroupfs-mount, xz-utils...).
	APT_RECOMMENDS=1 need_pkgs docker.io iptables
	if answers; then
		log "docker: already answering on $SOCK (not started by us)"
	else
		mkdir -p build/run
		log "docker: starting dockerd"
		start_daemon "$PIDFILE" build/run/dockerd.log dockerd --host "unix://$SOCK"
		wait_for "dockerd on $SOCK" 60 answers || { tail -n 30 build/run/dockerd.log >&2; exit 1; }
	fi
	echo "DOCKER_HOST=unix://$SOCK"
	;;
down)
	stop_daemon "$PIDFILE" dockerd
	;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
