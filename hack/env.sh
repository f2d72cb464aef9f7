#!/usr/bin/env bash
# hack/env.sh up|down — the test environment, from a bare machine.
#
# up (what `make env` runs; idempotent):
#   - installs the Debian packages the build needs,
#   - brings up each runtime of SANDBOXER_RUNTIMES (default: docker, podman,
#     podman-rootless, containerd and kubernetes, each through
#     hack/env/<runtime>.sh) — starting daemons only when none answers, and
#     recording what it started (and, for podman-rootless, what it changed)
#     under build/run/,
#   - builds (cached under ~/.cache/sandboxer) and serves the stand-in
#     images from a registry on 127.0.0.1 (hack/images.sh),
#   - writes build/images.env: image refs, registry and runtime endpoints,
#     so that `set -a; . build/images.env` is all a shell needs.
# down (what `make env-down` runs): stops only what `up` started.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source-path=SCRIPTDIR/.. source=hack/env/lib.sh
. hack/env/lib.sh

runtimes() {
	if [ -n "${SANDBOXER_RUNTIMES:-}" ]; then
		echo "$SANDBOXER_RUNTIMES" | tr ',' ' '
		return
	fi
	local rt
	for rt in docker podman podman-rootless containerd kubernetes; do
		[ -x "hack/env/$rt.sh" ] && echo "$rt"
	done
	return 0
}

up() {
	local t0 rt part
	t0=$(date +%s)
	mkdir -p build/run
	# The shellcheck package is for `make lint`, which `make ci` runs after this.
	need_pkgs ca-certificates curl debootstrap busybox-static iptables procps shellcheck
	part=$(mktemp)
	trap 'rm -f "$part"' RETURN
	for rt in $(runtimes); do
		[ -x "hack/env/$rt.sh" ] || { log "no hack/env/$rt.sh: cannot bring up $rt"; return 1; }
		log "runtime $rt: up"
		"hack/env/$rt.sh" up >>"$part"
	done
	log "images: build and serve"
	hack/images.sh
	{
		echo "# written by hack/env.sh on $(date -u +%FT%TZ); source with: set -a; . build/images.env"
		cat build/images.env.images
		cat "$part"
	} >build/images.env.tmp
	mv build/images.env.tmp build/images.env
	log "build/images.env:"
	sed 's/^/[env]   /' build/images.env >&2
	local started=() pidfile
	for pidfile in build/run/*.pid build/run/*/*.pid; do
		[ -e "$pidfile" ] && started+=("${pidfile#build/run/}")
	done
	log "up in $(($(date +%s) - t0))s; started by us: ${started[*]}"
}

down() {
	local list i rc=0 pf
	# A cgroup v2 guest (hack/guest/run.sh) still running, and its shares.
	for pf in build/run/guest-*.pid; do
		[ -f "$pf" ] && stop_daemon "$pf" "guest ${pf#build/run/guest-}"
	done
	rm -rf build/guest
	stop_daemon build/run/registry.pid registry
	read -r -a list <<<"$(runtimes | tr '\n' ' ')"
	for ((i = ${#list[@]} - 1; i >= 0; i--)); do
		[ -x "hack/env/${list[i]}.sh" ] || continue
		"hack/env/${list[i]}.sh" down || rc=1
	done
	return $rc
}

case "${1:-up}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
