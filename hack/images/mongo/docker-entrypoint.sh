#!/bin/sh
# docker-entrypoint.sh: the entrypoint of sandboxer's offline Mongo stand-in
# (FerretDB with its SQLite backend, plus the real mongosh). It honours the
# part of the official mongo:8 image's contract that sandboxer relies on:
#
#   MONGO_INITDB_ROOT_USERNAME / MONGO_INITDB_ROOT_PASSWORD (or their *_FILE
#   variants): when both are set, authentication is enforced and that user is
#   created in the "admin" database on first start (empty /data/db), so
#   clients log in with authSource=admin as with mongo:8. When neither is set,
#   the server runs without authentication, as mongo:8 does.
#   MONGO_INITDB_DATABASE: accepted; like mongo:8 (without init scripts) it
#   creates nothing, since databases appear on first write.
#
#   Data in /data/db, state in /data/configdb, listening on 0.0.0.0:27017.
#   The container starts as root, like mongo:8, so that a root-owned tmpfs or
#   volume on /data/db works: the server's data dirs are handed to uid 999
#   (mongodb) and the server runs as uid 999 (setpriv, where mongo:8 uses
#   gosu). Started as another user, it runs as that user.
#
#   The command is `mongod [OPTIONS]` (the default) or just OPTIONS: the few
#   mongod options with a FerretDB meaning (--port, --bind_ip, --bind_ip_all,
#   --dbpath, --quiet, --auth, --version) are translated, and so is
#   --wiredTigerCacheSizeGB N, mongod's memory bound, which becomes FerretDB's
#   (GOMEMLIMIT, N GiB: the Go runtime collects before the heap grows past
#   it, where it would otherwise grow to twice the live data); other mongod
#   options are ignored with a warning. `ferretdb [FLAGS]` runs FerretDB
#   with its own flags; any other command runs as is (`mongosh ...`, `sh`).
#
# FerretDB reads its configuration from FERRETDB_* variables; each default
# below can be overridden from the container's env. The password reaches
# FerretDB through its environment, never its argv (which `ps` shows).
set -eu

# file_env VAR: set VAR from the file named by VAR_FILE (the official images'
# convention for secrets); VAR and VAR_FILE together are an error.
file_env() {
	var=$1
	eval "val=\${$var:-}"
	eval "file=\${${var}_FILE:-}"
	if [ -n "$val" ] && [ -n "$file" ]; then
		echo "docker-entrypoint.sh: both $var and ${var}_FILE are set (they are exclusive)" >&2
		exit 1
	fi
	if [ -n "$file" ]; then
		val=$(cat "$file")
		export "$var=$val"
	fi
	unset "${var}_FILE" val file
}

warn() { echo "docker-entrypoint.sh: $*" >&2; }

# run_server [MONGOD_OPTIONS...]: translate, configure and exec FerretDB.
run_server() {
	listen_host=0.0.0.0
	listen_port=27017
	dbpath=/data/db
	while [ $# -gt 0 ]; do
		opt=$1
		shift
		case "$opt" in
		--port=*) listen_port=${opt#*=} ;;
		--port) listen_port=${1:?--port needs a value}; shift ;;
		--bind_ip_all) listen_host=0.0.0.0 ;;
		# mongod accepts a list; FerretDB listens on one address. A stand-in
		# that must be reachable from siblings keeps 0.0.0.0 unless the list
		# names exactly one address.
		--bind_ip=*) case "${opt#*=}" in *,*) ;; *) listen_host=${opt#*=} ;; esac ;;
		--bind_ip) case "${1:?--bind_ip needs a value}" in *,*) ;; *) listen_host=$1 ;; esac; shift ;;
		--dbpath=*) dbpath=${opt#*=} ;;
		--dbpath) dbpath=${1:?--dbpath needs a value}; shift ;;
		--quiet) : "${FERRETDB_LOG_LEVEL:=warn}" ;;
		--wiredTigerCacheSizeGB=*) cache_gb=${opt#*=} ;;
		--wiredTigerCacheSizeGB) cache_gb=${1:?--wiredTigerCacheSizeGB needs a value}; shift ;;
		--auth) ;; # authentication follows MONGO_INITDB_ROOT_*, as with mongo:8
		--version) exec ferretdb --version ;;
		--*=*) warn "ignoring mongod option ${opt%%=*} (no FerretDB equivalent)" ;;
		--*)
			warn "ignoring mongod option $opt (no FerretDB equivalent)"
			# skip the option's value, if it has one
			case "${1:-}" in -* | '') ;; *) shift ;; esac
			;;
		*) warn "ignoring argument $opt" ;;
		esac
	done

	if [ -n "${cache_gb:-}" ] && [ -z "${GOMEMLIMIT:-}" ]; then
		GOMEMLIMIT=$(awk -v gb="$cache_gb" 'BEGIN { if (gb + 0 <= 0) exit 1; printf "%dMiB", gb * 1024 }') ||
			{ warn "--wiredTigerCacheSizeGB $cache_gb: not a positive number"; exit 1; }
		export GOMEMLIMIT
	fi

	case "$listen_host" in
	*:*) ferretdb_defaults "[$listen_host]:$listen_port" "$dbpath" ;;
	*) ferretdb_defaults "$listen_host:$listen_port" "$dbpath" ;;
	esac
	exec_ferretdb
}

# ferretdb_defaults LISTEN DBPATH: FerretDB's settings for this image, unless
# the container's env already sets them.
ferretdb_defaults() {
	export FERRETDB_HANDLER="${FERRETDB_HANDLER:-sqlite}"
	export FERRETDB_SQLITE_URL="${FERRETDB_SQLITE_URL:-file:${2%/}/}"
	export FERRETDB_STATE_DIR="${FERRETDB_STATE_DIR:-/data/configdb}"
	export FERRETDB_LISTEN_ADDR="${FERRETDB_LISTEN_ADDR:-$1}"
	export FERRETDB_DEBUG_ADDR="${FERRETDB_DEBUG_ADDR:--}"
	export FERRETDB_TELEMETRY="${FERRETDB_TELEMETRY:-disable}"
	if [ -n "${FERRETDB_LOG_LEVEL:-}" ]; then
		export FERRETDB_LOG_LEVEL
	fi
}

# exec_ferretdb [FLAGS...]: configure authentication, then exec FerretDB as
# uid 999 (dropping root first if needed).
exec_ferretdb() {
	file_env MONGO_INITDB_ROOT_USERNAME
	file_env MONGO_INITDB_ROOT_PASSWORD
	user=${MONGO_INITDB_ROOT_USERNAME:-}
	pass=${MONGO_INITDB_ROOT_PASSWORD:-}
	if [ -n "$user" ] || [ -n "$pass" ]; then
		if [ -z "$user" ] || [ -z "$pass" ]; then
			warn "MONGO_INITDB_ROOT_USERNAME and MONGO_INITDB_ROOT_PASSWORD must be set together"
			exit 1
		fi
	fi
	if [ -n "$user" ]; then
		# SCRAM authentication against admin.system.users; FerretDB creates
		# the user as "admin.<user>" when the admin database does not exist
		# yet (first start), before it starts listening.
		export FERRETDB_TEST_ENABLE_NEW_AUTH=true
		export FERRETDB_SETUP_DATABASE=admin
		export FERRETDB_SETUP_USERNAME="$user"
		export FERRETDB_SETUP_PASSWORD="$pass"
	fi
	unset user pass

	# Started as root (the image's default, like mongo:8): hand the data dirs
	# to uid 999, which a fresh tmpfs or volume mounted there needs, then
	# drop to it.
	if [ "$(id -u)" = 0 ]; then
		sqlite_dir=${FERRETDB_SQLITE_URL:-}
		sqlite_dir=${sqlite_dir#file:}
		sqlite_dir=${sqlite_dir%%\?*}
		for d in /data/db /data/configdb "${FERRETDB_STATE_DIR:-}" "$sqlite_dir"; do
			if [ -n "$d" ] && [ -d "$d" ]; then
				chown -R 999:999 "$d"
			fi
		done
		exec setpriv --reuid=999 --regid=999 --init-groups -- ferretdb "$@"
	fi
	exec ferretdb "$@"
}

if [ $# -eq 0 ]; then
	set -- mongod
fi
case "$1" in
mongod)
	shift
	run_server "$@"
	;;
-*)
	run_server "$@"
	;;
ferretdb)
	shift
	ferretdb_defaults 0.0.0.0:27017 /data/db
	exec_ferretdb "$@"
	;;
*)
	exec "$@"
	;;
esac
