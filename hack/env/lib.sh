# shellcheck shell=bash
# Shared shell helpers for hack/env/*.sh and hack/env.sh. Sourced, not run.
# Everything logs to stderr: stdout is reserved for KEY=VALUE lines.

log() { printf '[env] %s\n' "$*" >&2; }

# need_pkgs PKG... installs the Debian packages that are not installed yet
# (without recommends, unless APT_RECOMMENDS=1).
need_pkgs() {
	local missing=()
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "apt: installing ${missing[*]}"
	# apt is not safe to run concurrently: serialise through a lock file;
	# and wait (bounded) for dpkg's own lock, which an apt outside this
	# script may hold (unattended-upgrades on a fresh machine, an operator's
	# apt-get), rather than fail at once.
	local wait=(-o "DPkg::Lock::Timeout=${SANDBOXER_APT_LOCK_TIMEOUT:-600}")
	(
		flock 9
		if [ ! -f /var/lib/apt/lists/sandboxer-updated ] || [ -n "$(find /var/lib/apt/lists/sandboxer-updated -mmin +720 2>/dev/null)" ]; then
			apt-get "${wait[@]}" update -q >&2 && touch /var/lib/apt/lists/sandboxer-updated
		fi
		local rec=--no-install-recommends
		[ "${APT_RECOMMENDS:-0}" = 1 ] && rec=
		DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" install -y -q $rec "${missing[@]}" >&2
	) 9>/var/lock/sandboxer-apt.lock
}

# start_daemon PIDFILE LOGFILE CMD... starts CMD detached in its own session
# and records its PID.
start_daemon() {
	local pidfile=$1 logfile=$2
	shift 2
	mkdir -p "$(dirname "$pidfile")" "$(dirname "$logfile")"
	setsid nohup "$@" >"$logfile" 2>&1 </dev/null &
	echo $! >"$pidfile"
}

# stop_daemon PIDFILE NAME stops the process recorded in PIDFILE (TERM, then
# KILL after 20 s) and removes the file. No PID file: nothing to do.
stop_daemon() {
	local pidfile=$1 name=$2 pid
	[ -f "$pidfile" ] || { log "$name: not started by us, left alone"; return 0; }
	pid=$(cat "$pidfile")
	if kill -0 "$pid" 2>/dev/null; then
		log "$name: stopping pid $pid"
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 200); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && { log "$name: still alive, SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; }
	fi
	rm -f "$pidfile"
}

# wait_for WHAT SECONDS CMD... polls CMD every 100 ms until it succeeds or
# the deadline passes.
wait_for() {
	local what=$1 secs=$2 deadline
	shift 2
	deadline=$(($(date +%s) + secs))
	until "$@"; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			log "timed out after ${secs}s waiting for $what"
			return 1
		fi
		sleep 0.1
	done
}

# service_limits PID prints the hard limits "NOFILE NPROC" of process PID
# ("self": this shell's), "unlimited" read as the largest value Podman
# accepts. A Podman service cannot raise rlimits past its own hard limits
# (no CAP_SYS_RESOURCE in some VMs, never for a rootless one), so these
# are what its containers may ask for.
service_limits() {
	local nofile nproc
	nofile=$(awk 'index($0, "Max open files") == 1 { print $(NF - 1) }' "/proc/$1/limits")
	nproc=$(awk 'index($0, "Max processes") == 1 { print $(NF - 1) }' "/proc/$1/limits")
	[ "$nofile" = unlimited ] && nofile=1048576
	[ "$nproc" = unlimited ] && nproc=4194304
	echo "$nofile $nproc"
}

# conf_has_limits FILE NOFILE NPROC reports whether the containers.conf
# FILE (podman_containers_conf) defaults to exactly those rlimits.
conf_has_limits() {
	grep -qF "\"nofile=$2:$2\", \"nproc=$3:$3\"" "$1"
}

# podman_containers_conf FILE NOFILE NPROC EVENTS_LOG WHAT [POOL] writes
# the containers.conf a sandboxer test service runs with: default rlimits
# NOFILE and NPROC (its own hard limits: Podman's default of 1048576 would
# fail every start), cgroupfs (no systemd session here), file events,
# netavark, and POOL (a /16) as the pool its networks' subnets come from
# when given. WHAT says whose config it is, in its header.
podman_containers_conf() {
	local file=$1 nofile=$2 nproc=$3 events=$4 what=$5 pool=${6:-}
	cat >"$file.tmp" <<EOC
# Written by hack/env: $what.
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
events_logfile_path = "$events"

[network]
network_backend = "netavark"
EOC
	if [ -n "$pool" ]; then
		printf 'default_subnet_pools = [{"base" = "%s", "size" = 24}]\n' "$pool" >>"$file.tmp"
	fi
	mv "$file.tmp" "$file"
}

# podman_registries_conf FILE writes a registries.conf in which the
# loopback stand-in registry is plain HTTP. A location without a port also
# matches host:port refs (containers/image prefix matching); the known
# loopback registry (SANDBOXER_REGISTRY, build/images.env) is listed too.
podman_registries_conf() {
	local file=$1 reg
	cat >"$file.tmp" <<'EOC'
# Written by hack/env: the loopback stand-in registry is plain HTTP.
unqualified-search-registries = ["docker.io"]

[[registry]]
location = "127.0.0.1"
insecure = true

[[registry]]
location = "localhost"
insecure = true
EOC
	for reg in ${SANDBOXER_REGISTRY:-} $(sed -n 's/^SANDBOXER_REGISTRY=//p' build/images.env 2>/dev/null | tr -d "\"'"); do
		case "$reg" in 127.* | localhost*) ;; *) continue ;; esac
		grep -qF "location = \"$reg\"" "$file.tmp" && continue
		printf '\n[[registry]]\nlocation = "%s"\ninsecure = true\n' "$reg" >>"$file.tmp"
	done
	mv "$file.tmp" "$file"
}

# podman_answers SOCK reports whether a Podman service answers /_ping on SOCK.
podman_answers() {
	[ -S "$1" ] && curl -fsS --max-time 2 --unix-socket "$1" http://d/_ping >/dev/null 2>&1
}

# podman_ours PIDFILE SOCK reports whether PIDFILE names a live `podman
# system service` on SOCK (a PID reused by another process after a reboot
# is not ours).
podman_ours() {
	local pid
	[ -f "$1" ] || return 1
	pid=$(cat "$1")
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "system service --time=0 unix://$2"
}

# podman_serve NAME SOCK PIDFILE LOGFILE CONF WRITE_CONF CMD... makes a
# Podman service answer on SOCK: when nothing answers there, it runs
# `WRITE_CONF NOFILE NPROC` (which writes the containers.conf CONF), starts
# `CMD... system service --time=0 unix://SOCK` detached (PID in PIDFILE,
# output in LOGFILE) and waits for /_ping. Podman lowers some of its own
# limits at start-up (4.3.1 here: nproc 32768): when the running service's
# hard limits are not CONF's defaults, it restarts it with them, so that
# containers ask for what the service may grant.
podman_serve() {
	local name=$1 sock=$2 pidfile=$3 logfile=$4 conf=$5 write=$6 nofile nproc
	shift 6
	if podman_answers "$sock"; then
		if podman_ours "$pidfile" "$sock"; then
			log "$name: already answering on $sock (started by us, pid $(cat "$pidfile"))"
		else
			log "$name: already answering on $sock (not started by us)"
		fi
		return 0
	fi
	if podman_ours "$pidfile" "$sock"; then
		stop_daemon "$pidfile" "$name service (not answering)"
	fi
	rm -f "$pidfile"
	read -r nofile nproc <<<"$(service_limits self)"
	"$write" "$nofile" "$nproc"
	podman_start "$name" "$sock" "$pidfile" "$logfile" "$@"
	read -r nofile nproc <<<"$(service_limits "$(cat "$pidfile")")"
	if ! conf_has_limits "$conf" "$nofile" "$nproc"; then
		log "$name: service limits are nofile=$nofile nproc=$nproc: restarting with them as defaults"
		stop_daemon "$pidfile" "$name service"
		"$write" "$nofile" "$nproc"
		podman_start "$name" "$sock" "$pidfile" "$logfile" "$@"
	fi
	log "$name: answering on $sock (pid $(cat "$pidfile"), default ulimits nofile=$nofile nproc=$nproc)"
}

# podman_start NAME SOCK PIDFILE LOGFILE CMD... (podman_serve's start).
podman_start() {
	local name=$1 sock=$2 pidfile=$3 logfile=$4
	shift 4
	rm -f "$sock"
	log "$name: starting podman system service on $sock"
	start_daemon "$pidfile" "$logfile" "$@" system service --time=0 "unix://$sock"
	wait_for "$name on $sock" 60 podman_answers_or_exited "$(cat "$pidfile")" "$sock" || true
	podman_answers "$sock" || { log "$name: not answering on $sock"; tail -n 30 "$logfile" >&2; exit 1; }
}

# podman_answers_or_exited PID SOCK: the service answers, or is gone (no
# use waiting any longer).
podman_answers_or_exited() {
	podman_answers "$2" || ! kill -0 "$1" 2>/dev/null
}

# podman_unserve NAME SOCK PIDFILE stops the service if (and only if)
# podman_serve started it, and removes its socket then; a service we did
# not start keeps its socket.
podman_unserve() {
	local name=$1 sock=$2 pidfile=$3
	if [ -f "$pidfile" ] && ! podman_ours "$pidfile" "$sock"; then
		log "$name: $pidfile names no service of ours (stale), removing it"
		rm -f "$pidfile"
	fi
	stop_daemon "$pidfile" "$name service"
	podman_answers "$sock" || rm -f "$sock"
}

# ctr_remove_all WHO kills, then deletes, every task and then every
# container that the sourcing script's ctr_ lists (ctr on its daemon's
# address and namespace); WHO names the daemon in the log.
ctr_remove_all() {
	local who=$1 id
	for id in $(ctr_ tasks ls -q 2>/dev/null); do
		ctr_ tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true
	done
	for id in $(ctr_ tasks ls -q 2>/dev/null); do
		ctr_ tasks delete --force "$id" >/dev/null 2>&1 || log "$who: task $id: delete failed"
	done
	for id in $(ctr_ containers ls -q 2>/dev/null); do
		ctr_ containers delete "$id" >/dev/null 2>&1 || log "$who: container $id: delete failed"
	done
}
