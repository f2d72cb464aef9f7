#!/usr/bin/env bash
# hack/env/kubernetes.sh up|down|build — a single-node Kubernetes cluster for
# the tests, on loopback and its own pod bridge, from binaries built offline.
#
# build: in a throw-away module (never ours), one `go build` of etcd (a small
#        main around go.etcd.io/etcd/server/v3/embed, hack/env/kubernetes/etcd),
#        kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
#        kubectl from k8s.io/kubernetes $VERSION, whose ./staging replaces are
#        replaced by their v0.x releases; cached by version under
#        ${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}/kubernetes-$VERSION/bin.
# up:    build (cached) and containerd's build (hack/env/containerd.sh build:
#        its v2.4.2 binaries, not built twice); then, each only when nothing
#        answers already: a CRI containerd of its own (root
#        /var/lib/sandboxer/kubernetes/containerd, socket
#        /run/sandboxer/kubernetes/containerd.sock, namespace k8s.io) whose
#        pinned pause image is the pause stand-in (hack/images/pause.sh, from
#        the loopback registry), etcd (127.0.0.1:$ETCD_PORT), kube-apiserver
#        (127.0.0.1:$API_PORT, static tokens, self-signed serving certs),
#        kube-controller-manager (serviceaccount, serviceaccount-token,
#        garbage collector, namespace, root-ca-cert-publisher), kube-scheduler
#        and the kubelet (node $NODE, InternalIP 127.0.0.1, CNI bridge $BRIDGE
#        on $POD_CIDR, no DNS); polls until the node is Ready, creates the
#        namespace $K8S_NAMESPACE and prints on stdout:
#          KUBECONFIG=/var/lib/sandboxer/kubernetes/kubeconfig
#          SANDBOXER_K8S_NAMESPACE=sandboxer
#          SANDBOXER_K8S_VERSION=$VERSION
#        The cluster's state (kubeconfigs, tokens, certs, etcd data) is
#        machine-wide under /var/lib/sandboxer/kubernetes, like the daemons,
#        so that another checkout's up finds a running cluster usable; PID
#        files and logs are this checkout's: build/run/kubernetes/<daemon>.*.
# down:  only what up started: deletes every pod (grace 0, waits), stops the
#        kubelet, scheduler, controller-manager, apiserver, etcd and the CRI
#        containerd (TERM, then KILL), unmounts what they mounted, removes the
#        kubelet's cgroups, the CNI allocations and caches, the bridge, the
#        iptables rules and chains the CNI plugins made for $POD_CIDR, and the
#        state dirs.
# All idempotent. Logs go to stderr; stdout carries only KEY=VALUE lines.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../.. source=hack/env/lib.sh
. hack/env/lib.sh
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin

VERSION=v1.37.2
# The staging modules' releases: k8s.io/kubernetes vX.Y.Z ships k8s.io/api
# and the others as v0.Y.Z.
STAGING_VERSION=v0.${VERSION#v1.}
CACHE=${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}/kubernetes-$VERSION
BIN=$CACHE/bin
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

built() {
	local b
	for b in "${BINARIES[@]}"; do
		[ -x "$BIN/$b" ] || return 1
	done
	"$BIN/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $VERSION"
}

# build_module DIR writes the throw-away module: kubernetes at $VERSION, each
# of its ./staging replaces replaced by that module's $STAGING_VERSION, and
# the etcd main.
build_module() {
	local dir=$1 mod b
	mkdir -p "$dir/etcd"
	grep -v '^//go:build ignore$' hack/env/kubernetes/etcd/main.go >"$dir/etcd/main.go"
	(
		cd "$dir"
		printf 'module sandboxer.invalid/k8s-build\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n' "$VERSION" >go.mod
		# kubernetes' own go.mod names the staging modules it replaces.
		go mod download -json "k8s.io/kubernetes@$VERSION" >kubernetes.json
		mod=$(sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p' kubernetes.json)
		[ -f "$mod" ] || { log "kubernetes: no go.mod for k8s.io/kubernetes@$VERSION"; return 1; }
		sed -n 's#^\t\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$mod" | while read -r m; do
			printf 'replace %s => %s %s\n' "$m" "$m" "$STAGING_VERSION"
		done >>go.mod
		[ "$(grep -c '^replace ' go.mod)" -gt 20 ] || { log "kubernetes: found no staging replaces in $mod"; return 1; }
		# Tool directives keep the kubernetes requirement through tidy (no
		# package of this module imports it, and tidy would drop it, then
		# the build would take @latest); etcd then comes at the version
		# kubernetes requires.
		for b in "${BINARIES[@]}"; do
			case "$b" in etcd) ;; *) printf 'tool k8s.io/kubernetes/cmd/%s\n' "$b" ;; esac
		done >>go.mod
		go mod tidy
		grep -qE "^(require )?[[:space:]]*k8s\.io/kubernetes $VERSION( |\$)" go.mod || { log "kubernetes: go.mod lost k8s.io/kubernetes $VERSION"; return 1; }
	)
}

build() {
	if built; then
		log "kubernetes: $VERSION binaries cached in $BIN"
		return 0
	fi
	local tmp t0 modcache b
	t0=$(date +%s)
	tmp=$(mktemp -d)
	# shellcheck disable=SC2064 # $tmp is expanded now on purpose: it is local, gone when the trap runs
	trap "chmod -R u+w '$tmp' 2>/dev/null; rm -rf '$tmp'" EXIT
	log "kubernetes: building $VERSION (${BINARIES[*]}) into $BIN (takes several minutes cold)"
	# The module cache is shared so that a warm machine downloads nothing;
	# GOPATH, GOFLAGS and the module are throw-away.
	modcache=$(go env GOMODCACHE)
	(
		export GOPATH=$tmp/gopath GOMODCACHE=$modcache GOFLAGS=-mod=mod GOTOOLCHAIN=local GO111MODULE=on CGO_ENABLED=0
		build_module "$tmp/src"
		cd "$tmp/src"
		go build -trimpath -ldflags "-s -w \
-X k8s.io/component-base/version.gitVersion=$VERSION \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$VERSION") \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$VERSION" \
			-o "$tmp/bin/" ./etcd \
			k8s.io/kubernetes/cmd/kube-apiserver \
			k8s.io/kubernetes/cmd/kube-controller-manager \
			k8s.io/kubernetes/cmd/kube-scheduler \
			k8s.io/kubernetes/cmd/kubelet \
			k8s.io/kubernetes/cmd/kubectl
	) >&2
	mkdir -p "$BIN"
	for b in "${BINARIES[@]}"; do
		install -m 0755 "$tmp/bin/$b" "$BIN/$b.new"
		mv -f "$BIN/$b.new" "$BIN/$b"
	done
	log "kubernetes: built in $(($(date +%s) - t0))s"
}


# The cluster's own places: machine-wide state (like the daemons, so that any
# checkout's `up` finds a cluster already running), per-checkout PID files
# and logs.
STATE=/var/lib/sandboxer/kubernetes
RUNSTATE=/run/sandboxer/kubernetes
RUN=$PWD/build/run/kubernetes
PKI=$STATE/pki
KUBECONFIG_ADMIN=$STATE/kubeconfig
CRI_ROOT=$STATE/containerd
CRI_STATE=$RUNSTATE/containerd
CRI_ADDRESS=$RUNSTATE/containerd.sock
CRI_CONFIG=$STATE/containerd.toml
CRI_CERTS=$STATE/certs.d
CNI_CONF=$STATE/cni
CNI_NET=sbxk8s
BRIDGE=sbxk8s0
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.245.0.0/24
# Pods' cgroups go under this parent in each cgroup v1 hierarchy, so that
# down removes exactly the kubelet's.
CGROUP_ROOT=sbxk8s
ETCD_PORT=12379
ETCD_PEER_PORT=12380
API_PORT=16443
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
CONTROLLER_MANAGER_PORT=10257
SCHEDULER_PORT=10259
# The node is named by its address: the kubelet then reports InternalIP
# 127.0.0.1 (it refuses a loopback --node-ip), and the API server reaches it
# there for exec and logs, without DNS.
NODE=127.0.0.1
K8S_NAMESPACE=sandboxer
CTR_BIN=${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}/containerd-v2.4.2/bin
DAEMONS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)
# How long each step may take before up gives up, naming the log to read.
STEP_TIMEOUT=${SANDBOXER_K8S_STEP_TIMEOUT:-120}

kubectl_() { timeout 60 "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
ctr_() { timeout 20 "$CTR_BIN/ctr" --address "$CRI_ADDRESS" --namespace k8s.io "$@"; }
pidfile() { echo "$RUN/$1.pid"; }
logfile() { echo "$RUN/$1.log"; }

# ours NAME reports whether NAME's PID file names a live process of the
# binary we start for it (a PID reused after a reboot is not ours; a binary
# rebuilt under a running daemon is still its binary).
ours() {
	local pf pid exe
	pf=$(pidfile "$1")
	[ -f "$pf" ] || return 1
	pid=$(cat "$pf")
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	exe=${exe% (deleted)}
	case "$1" in
	containerd) [ "$exe" = "$CTR_BIN/containerd" ] ;;
	*) [ "$exe" = "$BIN/$1" ] ;;
	esac
}

answers_containerd() { [ -S "$CRI_ADDRESS" ] && timeout 5 "$CTR_BIN/ctr" --address "$CRI_ADDRESS" version >/dev/null 2>&1; }
answers_etcd() { curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; }
answers_kube-apiserver() { [ -f "$KUBECONFIG_ADMIN" ] && kubectl_ get --raw /readyz >/dev/null 2>&1; }
# The controller-manager and the scheduler answer /healthz (always allowed,
# without credentials) on their loopback ports.
answers_kube-controller-manager() { curl -fsSk --max-time 2 "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz" >/dev/null 2>&1; }
answers_kube-scheduler() { curl -fsSk --max-time 2 "https://127.0.0.1:$SCHEDULER_PORT/healthz" >/dev/null 2>&1; }
answers_kubelet() { curl -fsS --max-time 2 "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" >/dev/null 2>&1; }

# serve NAME CMD... starts daemon NAME when nothing answers for it, and
# polls until it answers or exits; a clear error names its log.
serve() {
	local name=$1 pf lf
	shift
	pf=$(pidfile "$name")
	lf=$(logfile "$name")
	if "answers_$name"; then
		if ours "$name"; then
			log "kubernetes: $name already running (started by us, pid $(cat "$pf"))"
		else
			log "kubernetes: $name already answering (not started by us)"
			rm -f "$pf" # a stale PID file must not make `down` take it for ours
		fi
		return 0
	fi
	if ours "$name"; then
		stop_daemon "$pf" "kubernetes $name (not answering)"
	fi
	rm -f "$pf"
	log "kubernetes: starting $name (log: ${lf#"$PWD"/})"
	start_daemon "$pf" "$lf" "$@"
	if ! wait_for "$name" "$STEP_TIMEOUT" answers_or_exited "$name"; then
		log "kubernetes: $name did not answer within ${STEP_TIMEOUT}s: read ${lf#"$PWD"/}"
		tail -n 20 "$lf" >&2
		exit 1
	fi
	if ! "answers_$name"; then
		log "kubernetes: $name exited at start: read ${lf#"$PWD"/}"
		tail -n 20 "$lf" >&2
		exit 1
	fi
}

answers_or_exited() {
	"answers_$1" || ! kill -0 "$(cat "$(pidfile "$1")")" 2>/dev/null
}

# new_token prints a random bearer token.
new_token() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }

# write_pki makes, once, the service-account key pair and the static tokens
# (admin, node, controller-manager) with a kubeconfig for each. The API
# server writes its own self-signed serving certificate into $PKI (its
# --cert-dir), which the kubeconfigs name as the cluster's CA.
write_pki() {
	mkdir -p "$PKI"
	chmod 0700 "$PKI"
	if [ ! -f "$PKI/sa.key" ]; then
		openssl genrsa -out "$PKI/sa.key.tmp" 2048 2>/dev/null
		openssl rsa -in "$PKI/sa.key.tmp" -pubout -out "$PKI/sa.pub" 2>/dev/null
		mv "$PKI/sa.key.tmp" "$PKI/sa.key"
	fi
	# One static token per user (name, groups); a user added to this list
	# gets its token on the next up (the API server reads the file at start).
	local user groups
	touch "$PKI/tokens.csv"
	chmod 0600 "$PKI/tokens.csv"
	while read -r user groups; do
		awk -F, -v u="$user" '$2 == u { found = 1 } END { exit !found }' "$PKI/tokens.csv" && continue
		echo "$(new_token),$user,$user${groups:+,$groups}" >>"$PKI/tokens.csv"
	done <<EOF
sandboxer-admin system:masters
system:node:$NODE system:nodes
system:kube-controller-manager
system:kube-scheduler
EOF
	write_kubeconfig "$KUBECONFIG_ADMIN" sandboxer-admin
	write_kubeconfig "$STATE/kubelet.kubeconfig" "system:node:$NODE"
	write_kubeconfig "$STATE/controller-manager.kubeconfig" system:kube-controller-manager
	write_kubeconfig "$STATE/scheduler.kubeconfig" system:kube-scheduler
}

# write_kubeconfig FILE USER writes a kubeconfig for USER's static token
# (read from tokens.csv: never on a command line).
write_kubeconfig() {
	local file=$1 user=$2 token
	token=$(awk -F, -v u="$user" '$2 == u { print $1 }' "$PKI/tokens.csv")
	[ -n "$token" ] || { log "kubernetes: no token for $user in $PKI/tokens.csv"; exit 1; }
	(
		umask 077
		cat >"$file.tmp" <<EOF
# Written by hack/env/kubernetes.sh: the sandboxer test cluster, as $user.
apiVersion: v1
kind: Config
clusters:
- name: sandboxer
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI/apiserver.crt
users:
- name: $user
  user:
    token: $token
contexts:
- name: sandboxer
  context:
    cluster: sandboxer
    user: $user
    namespace: $K8S_NAMESPACE
current-context: sandboxer
EOF
		mv "$file.tmp" "$file"
	)
}

# write_cri_config writes the CRI containerd's config, its registry hosts
# (the loopback stand-in registry is plain HTTP) and the CNI network.
write_cri_config() {
	local pause=$1 reg
	reg=$(sed -n 's/^SANDBOXER_REGISTRY=//p' build/images.env.images)
	mkdir -p "$STATE" "$CRI_CERTS/$reg" "$CNI_CONF"
	cat >"$CRI_CERTS/$reg/hosts.toml.tmp" <<EOF
# Written by hack/env/kubernetes.sh: the stand-in registry serves plain HTTP.
server = "http://$reg"

[host."http://$reg"]
  capabilities = ["pull", "resolve"]
EOF
	mv -f "$CRI_CERTS/$reg/hosts.toml.tmp" "$CRI_CERTS/$reg/hosts.toml"
	cat >"$CNI_CONF/10-$CNI_NET.conflist.tmp" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "dataDir": "$STATE/cni-ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "firewall"}
  ]
}
EOF
	mv -f "$CNI_CONF/10-$CNI_NET.conflist.tmp" "$CNI_CONF/10-$CNI_NET.conflist"
	cat >"$CRI_CONFIG.tmp" <<EOF
# Written by hack/env/kubernetes.sh: the test cluster's CRI containerd, its
# own instance (root, state, socket, runc root), never the tests' nor Docker's.
version = 3
root = "$CRI_ROOT"
state = "$CRI_STATE"
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "$CRI_ADDRESS"

[ttrpc]
  address = "$CRI_ADDRESS.ttrpc"

[plugins]
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = "$CRI_STATE/s"
  [plugins.'io.containerd.internal.v1.opt']
    path = "$CRI_ROOT/opt"
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
  [plugins.'io.containerd.cri.v1.images']
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "$pause"
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = "$CRI_CERTS"
  [plugins.'io.containerd.cri.v1.runtime']
    # No CAP_SYS_RESOURCE in this VM: a container may not lower its OOM score
    # below the shim's, and runc fails ("can't get final child's PID").
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          Root = "$RUNSTATE/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$CNI_CONF"
      max_conf_num = 1
EOF
	mv -f "$CRI_CONFIG.tmp" "$CRI_CONFIG"
}

write_kubelet_config() {
	cat >"$STATE/kubelet.yaml.tmp" <<EOF
# Written by hack/env/kubernetes.sh: the test cluster's kubelet, on loopback.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
containerRuntimeEndpoint: unix://$CRI_ADDRESS
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
# This VM has cgroup v1 only.
failCgroupV1: false
failSwapOn: false
# Only the API server, on loopback, calls the kubelet.
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
# No DNS anywhere.
clusterDNS: []
resolvConf: ""
podLogsDir: $STATE/pod-logs
serializeImagePulls: false
# Other tests share this disk: evict only when it is really full.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
	mv -f "$STATE/kubelet.yaml.tmp" "$STATE/kubelet.yaml"
}

# cgroup_dirs prints the kubelet's cgroup parent in each cgroup hierarchy
# (the v1 controllers', and the hybrid layout's unified one, where the
# kubelet makes its cgroups too). On a pure cgroup v2 host there is one
# hierarchy, /sys/fs/cgroup itself: its top-level folders are cgroups, not
# hierarchies.
cgroup_dirs() {
	local d
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		echo "/sys/fs/cgroup/$CGROUP_ROOT"
		return 0
	fi
	for d in /sys/fs/cgroup/*/; do
		[ -f "$d/cgroup.procs" ] && echo "${d%/}/$CGROUP_ROOT"
	done
	return 0
}

# node_ready: the node is Ready and schedulable (the node lifecycle
# controller has lifted the not-ready taint the kubelet registers it with).
node_ready() {
	[ "$(kubectl_ get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.spec.taints}' 2>/dev/null)" = True/ ]
}
default_sa() { kubectl_ -n "$K8S_NAMESPACE" get serviceaccount default >/dev/null 2>&1; }

# step WHAT LOG CMD... polls CMD with the step deadline; on timeout the
# error names the log to read.
step() {
	local what=$1 lf=$2
	shift 2
	wait_for "$what" "$STEP_TIMEOUT" "$@" && return 0
	log "kubernetes: $what: not done within ${STEP_TIMEOUT}s: read ${lf#"$PWD"/}"
	tail -n 20 "$lf" >&2
	exit 1
}

up() {
	local t0 pause d
	t0=$(date +%s)
	need_pkgs runc containernetworking-plugins iptables iproute2 openssl curl busybox-static
	build
	hack/env/containerd.sh build
	mkdir -p "$RUN" "$STATE" "$RUNSTATE"
	# The pause image: the busybox stand-in whose command sleeps forever
	# (hack/images/pause.sh), served by the loopback registry like the others.
	hack/images.sh pause >&2
	pause=$(sed -n 's/^SANDBOXER_IMAGE_PAUSE=//p' build/images.env.images)
	[ -n "$pause" ] || { log "kubernetes: hack/images.sh wrote no SANDBOXER_IMAGE_PAUSE"; exit 1; }
	write_pki
	write_cri_config "$pause"
	write_kubelet_config
	for d in $(cgroup_dirs); do mkdir -p "$d"; done

	# The shim is looked up next to containerd, then in PATH: Debian's older
	# one must not be found first ("type with url ... not found").
	PATH="$CTR_BIN:$PATH" serve containerd "$CTR_BIN/containerd" --config "$CRI_CONFIG" --log-level info
	serve etcd "$BIN/etcd" -data-dir "$STATE/etcd" \
		-client-url "http://127.0.0.1:$ETCD_PORT" -peer-url "http://127.0.0.1:$ETCD_PEER_PORT"
	serve kube-apiserver "$BIN/kube-apiserver" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
		--cert-dir="$PKI" --token-auth-file="$PKI/tokens.csv" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--authorization-mode=Node,RBAC \
		--kubelet-preferred-address-types=InternalIP \
		--endpoint-reconciler-type=none \
		--allow-privileged=false --profiling=false
	serve kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig="$STATE/controller-manager.kubeconfig" \
		--controllers=serviceaccount-controller,serviceaccount-token-controller,garbage-collector-controller,namespace-controller,root-ca-certificate-publisher-controller,node-lifecycle-controller \
		--use-service-account-credentials=true \
		--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/apiserver.crt" \
		--bind-address=127.0.0.1 --secure-port="$CONTROLLER_MANAGER_PORT" --cert-dir="$PKI/controller-manager" \
		--leader-elect=false --profiling=false
	serve kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig="$STATE/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --cert-dir="$PKI/scheduler" \
		--leader-elect=false --profiling=false
	serve kubelet "$BIN/kubelet" --config="$STATE/kubelet.yaml" \
		--kubeconfig="$STATE/kubelet.kubeconfig" --hostname-override="$NODE" \
		--root-dir="$STATE/kubelet"
	step "node $NODE Ready" "$(logfile kubelet)" node_ready
	if ! kubectl_ get namespace "$K8S_NAMESPACE" >/dev/null 2>&1; then
		kubectl_ create namespace "$K8S_NAMESPACE" >&2
	fi
	# Pods are refused until the namespace's default service account exists.
	step "service account $K8S_NAMESPACE/default" "$(logfile kube-controller-manager)" default_sa
	log "kubernetes: cluster $VERSION ready in $(($(date +%s) - t0))s (kubeconfig $KUBECONFIG_ADMIN)"
	echo "KUBECONFIG=$KUBECONFIG_ADMIN"
	echo "SANDBOXER_K8S_NAMESPACE=$K8S_NAMESPACE"
	echo "SANDBOXER_K8S_VERSION=$VERSION"
}

# started_any reports whether up started any daemon (a PID file of ours).
started_any() {
	local d
	for d in "${DAEMONS[@]}"; do
		[ -f "$(pidfile "$d")" ] && return 0
	done
	return 1
}

no_pods() { [ -z "$(kubectl_ get pods -A -o name 2>/dev/null)" ]; }

# delete_pods deletes every pod of the cluster through the API (the kubelet
# stops them: their CNI DEL runs, their mounts go) and waits until none is
# left.
delete_pods() {
	ours kube-apiserver && ours kubelet || return 0
	log "kubernetes: deleting every pod (grace 0)"
	kubectl_ delete pods --all --all-namespaces --grace-period=0 --wait=false >/dev/null 2>&1 || true
	wait_for "every pod gone" 90 no_pods || log "kubernetes: pods left: $(kubectl_ get pods -A -o name 2>/dev/null | tr '\n' ' ')"
}

# remove_cri_containers removes what the kubelet left in the CRI containerd
# (stopped sandboxes and containers it had not collected yet); their ids go
# to LEFTOVER_IDS for the network clean-up.
LEFTOVER_IDS=""
remove_cri_containers() {
	ours containerd || return 0
	LEFTOVER_IDS=$(ctr_ containers ls -q 2>/dev/null | tr '\n' ' ' || true)
	ctr_remove_all kubernetes
}

# remove_runc_leftovers kills and deletes, with runc itself, the containers
# still in our runc root once containerd is gone (a crashed daemon cannot
# remove them: killing their shims alone would orphan their processes).
remove_runc_leftovers() {
	local root=$RUNSTATE/runc/k8s.io id
	[ -d "$root" ] || return 0
	for id in $(timeout 20 runc --root "$root" list -q 2>/dev/null); do
		log "kubernetes: runc delete --force $id"
		LEFTOVER_IDS="$LEFTOVER_IDS $id"
		timeout 20 runc --root "$root" delete --force "$id" >/dev/null 2>&1 || log "kubernetes: runc: cannot delete $id"
	done
}

# kill_shims stops the shims of our CRI containerd that outlived it (told by
# the daemon address on their command line).
kill_shims() {
	local pid
	for pid in $(pgrep -f -- "containerd-shim-runc-v2 .*-address $CRI_ADDRESS( |$)" || true); do
		log "kubernetes: stopping leftover shim $pid"
		kill -KILL "$pid" 2>/dev/null || true
	done
}

# unmount_ours unmounts, deepest first, what the kubelet and the CRI
# containerd mounted: everything under our state dirs (pods' emptyDirs and
# service-account tokens, sandboxes' shm and netns, containers' rootfs).
unmount_ours() {
	local m
	while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "kubernetes: cannot unmount $m"
		log "kubernetes: unmounted $m"
	done < <(awk -v a="$STATE/" -v b="$RUNSTATE/" 'index($2, a) == 1 || index($2, b) == 1 { print length($2), $2 }' /proc/self/mounts | sort -rn | cut -d' ' -f2-)
}

# clean_network removes what the CNI plugins left on the host for the pod
# network (`sweep network`, the containerd adapter's tested clean-up, told
# our pool and bridge): the bridge and its veths, the iptables rules that
# name a pod address or the bridge, or whose comment names a leftover
# sandbox, the CNI-* chains that leaves empty or dead, and libcni's cached
# results of those. It logs each object it removes.
clean_network() {
	local line f ids=$LEFTOVER_IDS
	# libcni's cached results of our network name their sandbox: a sandbox
	# the daemons forgot (a crash) is known by them.
	for f in /var/lib/cni/results/"$CNI_NET"-*; do
		[ -e "$f" ] || continue
		f=${f##*/"$CNI_NET"-}
		ids="$ids ${f%-*}"
	done
	while IFS= read -r line; do
		log "kubernetes: $line"
	done < <(GOFLAGS='' go run ./runtime/containerd/internal/sweep network -pool "$POD_CIDR" -bridge "$BRIDGE" \
		-state-dir "" -leftover-ids "$ids" || log "kubernetes: the network sweep failed: what it could not remove stays")
}

# remove_cgroups removes the kubelet's cgroups (empty once the pods are gone).
remove_cgroups() {
	local d
	for d in $(cgroup_dirs); do
		[ -d "$d" ] || continue
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
		[ -d "$d" ] && log "kubernetes: cgroup $d still in use, left"
	done
	return 0
}

down() {
	local d pf had_containerd=false
	if ! started_any; then
		log "kubernetes: not started by us, left alone"
		return 0
	fi
	[ -f "$(pidfile containerd)" ] && had_containerd=true
	# A PID file whose process is not our binary any more (it crashed, or
	# the machine rebooted and the PID is another process's) is forgotten:
	# that PID is never signalled.
	for d in "${DAEMONS[@]}"; do
		pf=$(pidfile "$d")
		if [ -f "$pf" ] && ! ours "$d"; then
			log "kubernetes: $d: pid $(cat "$pf") is not ours any more: forgotten"
			rm -f "$pf"
		fi
	done
	delete_pods
	for d in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do
		stop_daemon "$(pidfile "$d")" "kubernetes $d"
	done
	remove_cri_containers
	stop_daemon "$(pidfile containerd)" "kubernetes containerd"
	# The host state below (runc leftovers, shims, mounts, cgroups, CNI,
	# state dirs) is the CRI containerd's: it is cleaned only when this
	# checkout started that containerd, and none answers now (another
	# checkout's cluster is left whole).
	if ! $had_containerd || answers_containerd; then
		log "kubernetes: the CRI containerd was not ours or still answers: its host state is left alone"
		log "kubernetes: down"
		return 0
	fi
	remove_runc_leftovers
	kill_shims
	unmount_ours
	remove_cgroups
	clean_network
	rm -rf --one-file-system "$STATE" "$RUNSTATE"
	log "kubernetes: down"
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
