#!/usr/bin/env bash
# hack/env/containerd.sh up|down|build — a private containerd for the tests,
# next to (and never touching) the containerd that Docker runs.
#
# SANDBOXER_CONTAINERD picks the daemon:
#   v2.4.2 (default)  built from source, see build;
#   debian            Debian's packaged containerd (1.6.20 on bookworm), for a
#                     second run of the suite against an older daemon.
# Each has its own root (/var/lib/sandboxer/containerd[-debian]), state and
# address (/run/sandboxer/containerd[-debian]/containerd.sock), PID file and
# log (build/run/containerd[-debian].{pid,log}), so both can run at once.
#
# build: builds containerd, ctr and containerd-shim-runc-v2 v2.4.2 with
#        `go install` in a throw-away GOPATH (never in our module), cached by
#        version under ${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}/containerd-v2.4.2/bin.
# up:    build (cached; debian: apt-get install containerd), apt-get install
#        runc, containernetworking-plugins, iptables and iproute2 when
#        missing, write a private config (own root, state, gRPC address, shim
#        socket dir; cri, podsandbox and nri plugins disabled), start the
#        daemon when nothing answers on its address (PID file only then),
#        poll until it answers, and print on stdout:
#          CONTAINERD_ADDRESS=/run/sandboxer/containerd/containerd.sock
#          CONTAINERD_NAMESPACE=sandboxer
#          CONTAINERD_RUNC_ROOT=/run/sandboxer/containerd/runc
# down:  only if `up` started the daemon: removes every container left in the
#        sandboxer namespace (`sweep containers`, through the adapter, so that
#        each leaves its network; then with ctr), stops the daemon, and -
#        unless the other flavour's daemon still runs - removes what tests'
#        CNI networking left on the host (`sweep network`: the adapter's
#        bridges and veths, its iptables rules and the CNI chains they leave
#        dead, its CNI result caches, its state dir; what is the adapter's is
#        told by the adapter's own constants, see
#        runtime/containerd/internal/sweep).
# All idempotent. Logs go to stderr; stdout carries only KEY=VALUE lines.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../.. source=hack/env/lib.sh
. hack/env/lib.sh
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin

VERSION=v2.4.2
MODULE=github.com/containerd/containerd/v2
CACHE=${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}/containerd-$VERSION
BIN=$CACHE/bin
NAMESPACE=sandboxer
FLAVOUR=${SANDBOXER_CONTAINERD:-$VERSION}
case "$FLAVOUR" in
"$VERSION")
	SUFFIX=""
	OTHER_PIDFILE=build/run/containerd-debian.pid
	CONTAINERD=$BIN/containerd
	CTR=$BIN/ctr
	;;
debian)
	SUFFIX=-debian
	OTHER_PIDFILE=build/run/containerd.pid
	CONTAINERD=/usr/bin/containerd
	CTR=/usr/bin/ctr
	;;
*)
	echo "SANDBOXER_CONTAINERD=$FLAVOUR: want $VERSION or debian" >&2
	exit 2
	;;
esac
ROOT=/var/lib/sandboxer/containerd$SUFFIX
STATE=/run/sandboxer/containerd$SUFFIX
ADDRESS=$STATE/containerd.sock
RUNC_ROOT=$STATE/runc
PIDFILE=build/run/containerd$SUFFIX.pid
LOGFILE=build/run/containerd$SUFFIX.log
CONFIG=build/run/containerd$SUFFIX.toml

ctr_() { timeout 20 "$CTR" --address "$ADDRESS" --namespace "$NAMESPACE" "$@"; }
answers() { [ -S "$ADDRESS" ] && timeout 5 "$CTR" --address "$ADDRESS" version >/dev/null 2>&1; }
# sweep MODE [FLAG...] runs the adapter's clean-up command for this daemon.
sweep() {
	CONTAINERD_ADDRESS=$ADDRESS CONTAINERD_NAMESPACE=$NAMESPACE CONTAINERD_RUNC_ROOT=$RUNC_ROOT GOFLAGS='' \
		go run ./runtime/containerd/internal/sweep "$@"
}

built() {
	local b
	for b in containerd ctr containerd-shim-runc-v2; do
		[ -x "$BIN/$b" ] || return 1
	done
	"$BIN/containerd" --version 2>/dev/null | grep -q " $VERSION "
}

build() {
	if built; then
		log "containerd: $VERSION binaries cached in $BIN"
		return 0
	fi
	local tmp t0 ldflags modcache b
	t0=$(date +%s)
	tmp=$(mktemp -d)
	# shellcheck disable=SC2064 # $tmp is expanded now on purpose: it is local, gone when the trap runs
	trap "chmod -R u+w '$tmp' 2>/dev/null; rm -rf '$tmp'" EXIT
	log "containerd: building $VERSION with go install into $BIN (takes a few minutes cold)"
	ldflags="-X $MODULE/version.Version=$VERSION -X $MODULE/version.Revision=go-install -X $MODULE/version.Package=$MODULE"
	# A throw-away GOPATH/GOBIN, run outside our module: `go install pkg@version`
	# builds containerd against its own go.mod, and ours is never touched. The
	# module cache is shared so that a warm machine downloads nothing.
	modcache=$(go env GOMODCACHE)
	(
		cd "$tmp"
		export GOPATH=$tmp/gopath GOBIN=$tmp/bin GOMODCACHE=$modcache GOFLAGS='' GOTOOLCHAIN=local GO111MODULE=on
		# The daemon with the toolchain's default cgo setting (the Makefile
		# exports CGO_ENABLED=0 for the Podman bindings), the shim without.
		unset CGO_ENABLED
		go install -trimpath -tags no_btrfs -ldflags "$ldflags" \
			"$MODULE/cmd/containerd@$VERSION" "$MODULE/cmd/ctr@$VERSION"
		CGO_ENABLED=0 go install -trimpath -tags no_grpc -ldflags "$ldflags" \
			"$MODULE/cmd/containerd-shim-runc-v2@$VERSION"
	) >&2
	mkdir -p "$BIN"
	for b in containerd ctr containerd-shim-runc-v2; do
		install -m 0755 "$tmp/bin/$b" "$BIN/$b.new"
		mv -f "$BIN/$b.new" "$BIN/$b"
	done
	log "containerd: built in $(($(date +%s) - t0))s"
}

write_config() {
	mkdir -p "$(dirname "$CONFIG")"
	if [ "$FLAVOUR" = debian ]; then
		write_config_v2
		return
	fi
	cat >"$CONFIG.tmp" <<EOF
# Written by hack/env/containerd.sh: a private containerd for sandboxer's tests.
# Its own root, state, addresses and shim socket dir, so that it never
# disturbs the containerd that Docker (or the host) runs.
version = 3
root = "$ROOT"
state = "$STATE"
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.cri.v1.images",
  "io.containerd.cri.v1.runtime",
  "io.containerd.podsandbox.controller.v1.podsandbox",
  "io.containerd.nri.v1.nri",
]

[grpc]
  address = "$ADDRESS"

[ttrpc]
  address = "$ADDRESS.ttrpc"

[plugins]
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = "$STATE/s"
  [plugins.'io.containerd.internal.v1.opt']
    path = "$ROOT/opt"
EOF
	mv -f "$CONFIG.tmp" "$CONFIG"
}

# write_config_v2 is the same for containerd 1.x (config version 2, whose
# shims put their sockets under /run/containerd/s, named by a hash of the
# daemon's address: apart from everyone else's all the same).
write_config_v2() {
	cat >"$CONFIG.tmp" <<EOF
# Written by hack/env/containerd.sh: a private containerd for sandboxer's tests.
version = 2
root = "$ROOT"
state = "$STATE"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$ADDRESS"

[ttrpc]
  address = "$ADDRESS.ttrpc"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$ROOT/opt"
EOF
	mv -f "$CONFIG.tmp" "$CONFIG"
}

up() {
	need_pkgs runc containernetworking-plugins iptables iproute2
	if [ "$FLAVOUR" = debian ]; then
		need_pkgs containerd
	else
		build
	fi
	if answers; then
		log "containerd: already answering on $ADDRESS"
	else
		write_config
		mkdir -p build/run "$ROOT" "$STATE" "$RUNC_ROOT"
		log "containerd: starting $("$CONTAINERD" --version | awk '{print $3}') on $ADDRESS (log: $LOGFILE)"
		# The shim is looked up next to the containerd binary, then in PATH.
		PATH="$(dirname "$CONTAINERD"):$PATH" start_daemon "$PIDFILE" "$LOGFILE" \
			"$CONTAINERD" --config "$CONFIG" --log-level info
		if ! wait_for "containerd on $ADDRESS" 60 answers; then
			tail -n 30 "$LOGFILE" >&2
			exit 1
		fi
	fi
	echo "CONTAINERD_ADDRESS=$ADDRESS"
	echo "CONTAINERD_NAMESPACE=$NAMESPACE"
	echo "CONTAINERD_RUNC_ROOT=$RUNC_ROOT"
}

# remove_leftover_containers removes every container of our namespace
# (containers outlive containerd itself: their shims keep running): first
# through the adapter (`sweep containers`), which leaves each container's
# network properly, then with ctr for whatever is left. The ids go to
# LEFTOVER_IDS for the network clean-up.
LEFTOVER_IDS=""
remove_leftover_containers() {
	local swept
	answers || return 0
	LEFTOVER_IDS=$(ctr_ containers ls -q 2>/dev/null | tr '\n' ' ' || true)
	[ -n "$LEFTOVER_IDS" ] || return 0
	log "containerd: removing leftover containers: $LEFTOVER_IDS"
	swept=$(sweep containers) || log "containerd: the sweep failed; falling back to ctr"
	[ -z "$swept" ] || log "containerd: swept $(tr '\n' ' ' <<<"$swept")"
	ctr_remove_all containerd
}

# clean_network removes what the adapter's CNI networking left on the host
# (`sweep network`; it needs no daemon), logging each object it removes.
clean_network() {
	local line
	while IFS= read -r line; do
		log "containerd: $line"
	done < <(sweep network --leftover-ids "$LEFTOVER_IDS" || log "containerd: the network sweep failed: what it could not remove stays")
}

down() {
	if [ ! -f "$PIDFILE" ]; then
		log "containerd: not started by us, left alone"
		return 0
	fi
	remove_leftover_containers
	stop_daemon "$PIDFILE" "containerd$SUFFIX"
	if [ -f "$OTHER_PIDFILE" ] && kill -0 "$(cat "$OTHER_PIDFILE")" 2>/dev/null; then
		log "containerd: the other daemon ($OTHER_PIDFILE) still runs: networks left to its down"
		return 0
	fi
	clean_network
}

case "${1:-up}" in
up) up ;;
down) down ;;
build) build ;;
*)
	echo "usage: $0 up|down|build" >&2
	exit 2
	;;
esac
