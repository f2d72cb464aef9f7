#!/usr/bin/env bash
# Entrypoint of sandboxer's postgres stand-in. It follows the contract of
# the official postgres image's docker-entrypoint.sh:
#   - POSTGRES_PASSWORD (required unless POSTGRES_HOST_AUTH_METHOD=trust),
#     POSTGRES_USER (default postgres), POSTGRES_DB (default POSTGRES_USER),
#     each also readable from a file named by <VAR>_FILE;
#     POSTGRES_INITDB_ARGS, POSTGRES_INITDB_WALDIR, POSTGRES_HOST_AUTH_METHOD
#     (default scram-sha-256);
#   - PGDATA (the image's Env), which may be an empty tmpfs: when started
#     as root, the directories are created and chowned, then the script
#     re-executes itself as postgres with gosu;
#   - from 18, with PGDATA at its default /var/lib/postgresql/$PG_MAJOR/docker,
#     an uninitialised start refuses (exit 1) when a cluster of the old
#     layout is found or /var/lib/postgresql/data is a mount point;
#   - on first start (no PG_VERSION in PGDATA): initdb, a "host all all all
#     <method>" rule, a temporary server listening on the unix socket only
#     (listen_addresses=''), POSTGRES_DB created, /docker-entrypoint-initdb.d
#     (*.sh, *.sql, *.sql.gz, *.sql.xz, *.sql.zst) run, temporary server
#     stopped; then the real server starts listening on '*';
#   - a first argument starting with '-' means `postgres <args>`; the
#     arguments of `postgres` are passed to both servers; any other command
#     is run as is.
set -Eeo pipefail

# file_env VAR [DEFAULT]: VAR from itself, or from the file named by VAR_FILE.
file_env() {
	local var="$1" fileVar="${1}_FILE" def="${2:-}"
	if [ "${!var:-}" ] && [ "${!fileVar:-}" ]; then
		printf >&2 'error: both %s and %s are set (but are exclusive)\n' "$var" "$fileVar"
		exit 1
	fi
	local val="$def"
	if [ "${!var:-}" ]; then
		val="${!var}"
	elif [ "${!fileVar:-}" ]; then
		val="$(<"${!fileVar}")"
	fi
	export "$var"="$val"
	unset "$fileVar"
}

docker_setup_env() {
	file_env 'POSTGRES_PASSWORD'
	file_env 'POSTGRES_USER' 'postgres'
	file_env 'POSTGRES_DB' "$POSTGRES_USER"
	file_env 'POSTGRES_INITDB_ARGS'
	: "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"
	: "${PGDATA:=/var/lib/postgresql/data}"
	export PGDATA
	declare -g DATABASE_ALREADY_EXISTS
	declare -ag OLD_DATABASES=()
	if [ -s "$PGDATA/PG_VERSION" ]; then
		DATABASE_ALREADY_EXISTS='true'
	elif [ "$PGDATA" = "/var/lib/postgresql/${PG_MAJOR:-}/docker" ]; then
		local d
		for d in /var/lib/postgresql /var/lib/postgresql/data /var/lib/postgresql/*/docker; do
			if [ -s "$d/PG_VERSION" ]; then
				OLD_DATABASES+=("$d")
			fi
		done
		if [ "${#OLD_DATABASES[@]}" -eq 0 ] && [ "$PG_MAJOR" -ge 18 ] && mountpoint -q /var/lib/postgresql/data; then
			OLD_DATABASES+=('/var/lib/postgresql/data (unused mount/volume)')
		fi
	fi
}

# The 18+ guard against the layout before it: data (or a mount) where the
# old PGDATA was.
docker_error_old_databases() {
	if [ -n "${OLD_DATABASES[0]:-}" ]; then
		printf >&2 'Error: in 18+, these Docker images are configured to store database data in a\n'
		printf >&2 '       major-version-specific directory; there appears to be PostgreSQL data in:\n'
		printf >&2 '         %s\n' "${OLD_DATABASES[*]}"
		printf >&2 '       The suggested container configuration for 18+ is to place a single mount\n'
		printf >&2 '       at /var/lib/postgresql.\n'
		exit 1
	fi
}

# Create PGDATA and the socket directory; as root, also hand them to postgres.
docker_create_db_directories() {
	local user
	user="$(id -u)"
	mkdir -p "$PGDATA"
	chmod 00700 "$PGDATA" || :
	mkdir -p /var/run/postgresql || :
	chmod 03775 /var/run/postgresql || :
	if [ -n "${POSTGRES_INITDB_WALDIR:-}" ]; then
		mkdir -p "$POSTGRES_INITDB_WALDIR"
		if [ "$user" = '0' ]; then
			find "$POSTGRES_INITDB_WALDIR" \! -user postgres -exec chown postgres '{}' +
		fi
		chmod 700 "$POSTGRES_INITDB_WALDIR"
	fi
	if [ "$user" = '0' ]; then
		find "$PGDATA" \! -user postgres -exec chown postgres:postgres '{}' +
		find /var/run/postgresql \! -user postgres -exec chown postgres:postgres '{}' +
	fi
}

docker_verify_minimum_env() {
	if [ -z "$POSTGRES_PASSWORD" ] && [ 'trust' != "$POSTGRES_HOST_AUTH_METHOD" ]; then
		cat >&2 <<-'EOM'
			Error: Database is uninitialized and superuser password is not specified.
			       You must specify POSTGRES_PASSWORD to a non-empty value for the
			       superuser. For example, "-e POSTGRES_PASSWORD=password" on "docker run".

			       You may also use "POSTGRES_HOST_AUTH_METHOD=trust" to allow all
			       connections without a password. This is *not* recommended.
		EOM
		exit 1
	fi
}

docker_init_database_dir() {
	local -a args=(--username="$POSTGRES_USER")
	if [ -n "${POSTGRES_INITDB_WALDIR:-}" ]; then
		args+=(--waldir "$POSTGRES_INITDB_WALDIR")
	fi
	if [ -n "$POSTGRES_PASSWORD" ]; then
		# The password goes through a pipe, never argv or the environment of initdb.
		# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is split into words, as the official image does
		initdb "${args[@]}" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") $POSTGRES_INITDB_ARGS
	else
		# shellcheck disable=SC2086 # as above
		initdb "${args[@]}" $POSTGRES_INITDB_ARGS
	fi
}

pg_setup_hba_conf() {
	{
		printf '\n'
		if [ 'trust' = "$POSTGRES_HOST_AUTH_METHOD" ]; then
			printf '# warning trust is enabled for all connections\n'
		fi
		printf 'host all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD"
	} >>"$PGDATA/pg_hba.conf"
}

# docker_temp_server_start ARGS...: a server on the unix socket only, so
# nothing outside the container can reach it while it is initialising.
docker_temp_server_start() {
	set -- "$@" -c listen_addresses='' -p "${PGPORT:-5432}"
	PGUSER="${PGUSER:-$POSTGRES_USER}" \
		pg_ctl -D "$PGDATA" -o "$(printf '%q ' "$@")" -w start
}

docker_temp_server_stop() {
	PGUSER="${PGUSER:-postgres}" pg_ctl -D "$PGDATA" -m fast -w stop
}

docker_process_sql() {
	local -a query_runner=(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc)
	if [ -n "$POSTGRES_DB" ]; then
		query_runner+=(--dbname "$POSTGRES_DB")
	fi
	PGHOST='' PGHOSTADDR='' "${query_runner[@]}" "$@"
}

# POSTGRES_DB='postgres' applies to docker_process_sql only, while
# db="$POSTGRES_DB" must see the user's value (as in the official script).
# shellcheck disable=SC2097,SC2098
docker_setup_db() {
	local exists
	exists="$(POSTGRES_DB='postgres' docker_process_sql --dbname postgres --set db="$POSTGRES_DB" --tuples-only <<-'EOSQL'
		SELECT 1 FROM pg_database WHERE datname = :'db' ;
	EOSQL
	)"
	if [ -z "$exists" ]; then
		POSTGRES_DB='postgres' docker_process_sql --dbname postgres --set db="$POSTGRES_DB" <<-'EOSQL'
			CREATE DATABASE :"db" ;
		EOSQL
		printf '\n'
	fi
}

docker_process_init_files() {
	local f
	printf '\n'
	for f; do
		case "$f" in
		*.sh)
			if [ -x "$f" ]; then
				printf '%s: running %s\n' "$0" "$f"
				"$f"
			else
				printf '%s: sourcing %s\n' "$0" "$f"
				# shellcheck disable=SC1090 # the user's init script: known only at run time
				. "$f"
			fi
			;;
		*.sql) printf '%s: running %s\n' "$0" "$f"; docker_process_sql -f "$f"; printf '\n' ;;
		*.sql.gz) printf '%s: running %s\n' "$0" "$f"; gunzip -c "$f" | docker_process_sql; printf '\n' ;;
		*.sql.xz) printf '%s: running %s\n' "$0" "$f"; xzcat "$f" | docker_process_sql; printf '\n' ;;
		*.sql.zst) printf '%s: running %s\n' "$0" "$f"; zstd -dc "$f" | docker_process_sql; printf '\n' ;;
		*) printf '%s: ignoring %s\n' "$0" "$f" ;;
		esac
		printf '\n'
	done
}

# _pg_want_help ARGS...: true when postgres is asked to print and exit.
_pg_want_help() {
	local arg
	for arg; do
		case "$arg" in
		-'?' | --help | --describe-config | -V | --version) return 0 ;;
		esac
	done
	return 1
}

_main() {
	if [ "${1:0:1}" = '-' ]; then
		set -- postgres "$@"
	fi

	if [ "$1" = 'postgres' ] && ! _pg_want_help "$@"; then
		docker_setup_env
		docker_create_db_directories
		if [ "$(id -u)" = '0' ]; then
			# Drop to postgres and start over as that user.
			exec gosu postgres "${BASH_SOURCE[0]}" "$@"
		fi

		if [ -z "$DATABASE_ALREADY_EXISTS" ]; then
			docker_verify_minimum_env
			docker_error_old_databases
			# Fail before initdb rather than after, if the directory is unreadable.
			ls /docker-entrypoint-initdb.d/ >/dev/null
			docker_init_database_dir
			pg_setup_hba_conf
			export PGPASSWORD="${PGPASSWORD:-$POSTGRES_PASSWORD}"
			docker_temp_server_start "${@:2}"
			docker_setup_db
			shopt -s nullglob
			docker_process_init_files /docker-entrypoint-initdb.d/*
			shopt -u nullglob
			docker_temp_server_stop
			unset PGPASSWORD
			printf '\nPostgreSQL init process complete; ready for start up.\n\n'
		else
			printf '\nPostgreSQL Database directory appears to contain a database; Skipping initialization\n\n'
		fi
	fi

	exec "$@"
}

_main "$@"
