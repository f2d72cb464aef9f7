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
	# apt is not safe to run concurrently: serialise through a lock file.
	(
		flock 9
		if [ ! -f /var/lib/apt/lists/sandboxer-updated ] || [ -n "$(find /var/lib/apt/lists/sandboxer-updated -mmin +720 2>/dev/null)" ]; then
			apt-get update -q >&2 && touch /var/lib/apt/lists/sandboxer-updated
		fi
		local rec=--no-install-recommends
		[ "${APT_RECOMMENDS:-0}" = 1 ] && rec=
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $rec "${missing[@]}" >&2
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
