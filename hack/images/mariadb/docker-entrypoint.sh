#!/usr/bin/env bash
# Entrypoint of sandboxer's mariadb stand-in. It follows the contract of
# the official mariadb image's docker-entrypoint.sh (docker-library/mariadb,
# 11.x):
#   - MARIADB_ROOT_PASSWORD (or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD, or
#     MARIADB_RANDOM_ROOT_PASSWORD) is required on first start;
#     MARIADB_USER + MARIADB_PASSWORD make a user, MARIADB_DATABASE a
#     database the user gets every privilege on; MARIADB_ROOT_HOST (default
#     %) where root may log in from; each also readable from a file named
#     by <VAR>_FILE, and the MYSQL_* names are aliases;
#   - the data directory (mariadbd's datadir, /var/lib/mysql), which may be
#     an empty tmpfs: when started as root, it and the socket directory are
#     created and chowned, then the script re-executes itself as mysql with
#     gosu;
#   - on first start (no mysql/ in the data directory): mariadb-install-db,
#     a temporary server with networking off (the unix socket only), the
#     root password, root@MARIADB_ROOT_HOST, the database and the user
#     made, /docker-entrypoint-initdb.d (*.sh, *.sql, *.sql.gz) run,
#     temporary server shut down; then the real server starts on TCP;
#   - a first argument starting with '-' means `mariadbd <args>`; the
#     arguments of `mariadbd` are passed to both servers; any other command
#     is run as is.
set -Eeo pipefail

note() { printf '%s [Note] [Entrypoint]: %s\n' "$(date --rfc-3339=seconds)" "$*"; }
error() {
	printf >&2 '%s [ERROR] [Entrypoint]: %s\n' "$(date --rfc-3339=seconds)" "$*"
	exit 1
}

# file_env VAR [DEFAULT]: VAR from itself, its MYSQL_ alias, or the file
# named by VAR_FILE (or the alias's _FILE).
file_env() {
	local var="$1" def="${2:-}"
	local alias="MYSQL_${var#MARIADB_}"
	local fileVar="${var}_FILE" aliasFile="${alias}_FILE"
	if [ "${!var:-}" ] && [ "${!fileVar:-}" ]; then
		error "both $var and $fileVar are set (but are exclusive)"
	fi
	local val="$def"
	if [ "${!var:-}" ]; then
		val="${!var}"
	elif [ "${!fileVar:-}" ]; then
		val="$(<"${!fileVar}")"
	elif [ "${!alias:-}" ]; then
		val="${!alias}"
	elif [ "${!aliasFile:-}" ]; then
		val="$(<"${!aliasFile}")"
	fi
	export "$var"="$val"
	unset "$fileVar" "$alias" "$aliasFile"
}

# mysql_get_config NAME ARGS...: the value mariadbd would use for NAME.
mysql_get_config() {
	local conf="$1"
	shift
	"$@" --verbose --help 2>/dev/null | awk -v conf="$conf" '$1 == conf && /^[^ \t]/ { sub(/^[^ \t]+[ \t]+/, ""); print; exit }'
}

docker_setup_env() {
	DATADIR="$(mysql_get_config 'datadir' "$@")"
	DATADIR="${DATADIR%/}"
	SOCKET="$(mysql_get_config 'socket' "$@")"
	file_env 'MARIADB_ROOT_HOST' '%'
	file_env 'MARIADB_DATABASE'
	file_env 'MARIADB_USER'
	file_env 'MARIADB_PASSWORD'
	file_env 'MARIADB_ROOT_PASSWORD'
	file_env 'MARIADB_ALLOW_EMPTY_ROOT_PASSWORD'
	file_env 'MARIADB_RANDOM_ROOT_PASSWORD'
	declare -g DATABASE_ALREADY_EXISTS=
	if [ -d "$DATADIR/mysql" ]; then
		DATABASE_ALREADY_EXISTS='true'
	fi
}

docker_verify_minimum_env() {
	if [ -z "$MARIADB_ROOT_PASSWORD" ] && [ -z "$MARIADB_ALLOW_EMPTY_ROOT_PASSWORD" ] && [ -z "$MARIADB_RANDOM_ROOT_PASSWORD" ]; then
		error 'Database is uninitialized and password option is not specified
	You need to specify one of MARIADB_ROOT_PASSWORD, MARIADB_ROOT_PASSWORD_HASH, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD and MARIADB_RANDOM_ROOT_PASSWORD'
	fi
	if [ -n "$MARIADB_USER" ] && [ -z "$MARIADB_PASSWORD" ]; then
		error 'MARIADB_USER is set but MARIADB_PASSWORD is not'
	fi
	if [ "$MARIADB_USER" = 'root' ]; then
		error 'MARIADB_USER="root": root is made by MARIADB_ROOT_PASSWORD'
	fi
}

# The data and socket directories, handed to mysql when run as root.
docker_create_db_directories() {
	mkdir -p "$DATADIR" "$(dirname "$SOCKET")"
	if [ "$(id -u)" = '0' ]; then
		find "$DATADIR" "$(dirname "$SOCKET")" \! -user mysql -exec chown mysql: '{}' +
	fi
}

# docker_process_sql ARGS...: SQL on stdin through the temporary server's
# socket, as root: without a password until docker_setup_db has set one,
# then with it (in the client's environment, never in its argv).
docker_process_sql() {
	local cmd=(mariadb --protocol=socket -uroot -hlocalhost --socket="${SOCKET}" --comments "$@")
	if [ -n "${ROOT_PASSWORD_SET:-}" ]; then
		MYSQL_PWD="$MARIADB_ROOT_PASSWORD" "${cmd[@]}"
	else
		"${cmd[@]}"
	fi
}

docker_temp_server_start() {
	"$@" --skip-networking --default-time-zone=SYSTEM --socket="${SOCKET}" --wsrep_on=OFF \
		--expire-logs-days=0 --loose-innodb_buffer_pool_load_at_startup=0 &
	declare -g MARIADB_PID=$!
	note 'Waiting for server startup'
	local i
	for i in {30..0}; do
		if mariadb --protocol=socket -uroot -hlocalhost --socket="${SOCKET}" --database=mysql -e 'SELECT 1' >/dev/null 2>&1; then
			break
		fi
		kill -0 "$MARIADB_PID" 2>/dev/null || error 'Unable to start server.'
		sleep 1
	done
	if [ "$i" = 0 ]; then
		error 'Unable to start server.'
	fi
}

docker_temp_server_stop() {
	kill "$MARIADB_PID"
	wait "$MARIADB_PID" || true
}

docker_init_database_dir() {
	note 'Initializing database files'
	mariadb-install-db --datadir="$DATADIR" --rpm --auth-root-authentication-method=normal \
		--skip-test-db --default-time-zone=SYSTEM --enforce-storage-engine= --skip-log-bin \
		--expire-logs-days=0 --loose-innodb_buffer_pool_load_at_startup=0 \
		--loose-innodb_buffer_pool_dump_at_shutdown=0 >/dev/null
	note 'Database files initialized'
}

# The SQL quoting the official entrypoint uses: '' for ', \\ for \.
docker_sql_escape_string_literal() {
	local newline=$'\n'
	local escaped=${1//\\/\\\\}
	escaped="${escaped//$newline/\\n}"
	echo "${escaped//\'/\\\'}"
}

docker_setup_db() {
	if [ -n "$MARIADB_RANDOM_ROOT_PASSWORD" ]; then
		MARIADB_ROOT_PASSWORD="$(head -c 24 /dev/urandom | base64)"
		export MARIADB_ROOT_PASSWORD
		note "GENERATED ROOT PASSWORD: (not printed by this stand-in)"
	fi
	local rootPasswordEscaped rootHostEscaped userPasswordEscaped
	rootPasswordEscaped=$(docker_sql_escape_string_literal "${MARIADB_ROOT_PASSWORD}")
	rootHostEscaped=$(docker_sql_escape_string_literal "${MARIADB_ROOT_HOST}")
	local rootCreate=
	if [ -n "$MARIADB_ROOT_HOST" ] && [ "$MARIADB_ROOT_HOST" != 'localhost' ]; then
		rootCreate="CREATE USER 'root'@'${rootHostEscaped}' IDENTIFIED BY '${rootPasswordEscaped}';
GRANT ALL ON *.* TO 'root'@'${rootHostEscaped}' WITH GRANT OPTION;
GRANT PROXY ON ''@'%' TO 'root'@'${rootHostEscaped}' WITH GRANT OPTION;"
	fi
	local createDatabase=
	if [ -n "$MARIADB_DATABASE" ]; then
		note "Creating database ${MARIADB_DATABASE}"
		createDatabase="CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;"
	fi
	local createUser='' userGrants=''
	if [ -n "$MARIADB_USER" ]; then
		note "Creating user ${MARIADB_USER}"
		userPasswordEscaped=$(docker_sql_escape_string_literal "${MARIADB_PASSWORD}")
		createUser="CREATE USER '$MARIADB_USER'@'%' IDENTIFIED BY '$userPasswordEscaped';"
		if [ -n "$MARIADB_DATABASE" ]; then
			userGrants="GRANT ALL ON \`${MARIADB_DATABASE//_/\\_}\`.* TO '$MARIADB_USER'@'%';"
		fi
	fi
	note 'Securing system users (equivalent to running mysql_secure_installation)'
	docker_process_sql --database=mysql --binary-mode <<-EOSQL
		SET @@SESSION.SQL_LOG_BIN=0;
		SET @@SESSION.SQL_MODE=REPLACE(@@SESSION.SQL_MODE, 'NO_BACKSLASH_ESCAPES', '');
		DROP USER IF EXISTS root@'127.0.0.1', root@'::1';
		EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\'', @@hostname,'\'');
		SET PASSWORD FOR 'root'@'localhost'= PASSWORD('${rootPasswordEscaped}');
		${rootCreate}
		${createDatabase}
		${createUser}
		${userGrants}
	EOSQL
	declare -g ROOT_PASSWORD_SET=1
}

docker_process_init_files() {
	local f
	for f; do
		case "$f" in
		*.sh)
			note "$0: running $f"
			# shellcheck disable=SC1090 # the user's own script
			. "$f"
			;;
		*.sql)
			note "$0: running $f"
			docker_process_sql <"$f"
			;;
		*.sql.gz)
			note "$0: running $f"
			gunzip -c "$f" | docker_process_sql
			;;
		*) note "$0: ignoring $f" ;;
		esac
	done
}

_main() {
	if [ "${1:0:1}" = '-' ]; then
		set -- mariadbd "$@"
	fi
	if [ "$1" = 'mariadbd' ] || [ "$1" = 'mysqld' ]; then
		note "Entrypoint script for MariaDB Server (sandboxer stand-in) started."
		docker_setup_env "$@"
		docker_create_db_directories
		if [ "$(id -u)" = '0' ]; then
			note "Switching to dedicated user 'mysql'"
			exec gosu mysql "${BASH_SOURCE[0]}" "$@"
		fi
		if [ -z "$DATABASE_ALREADY_EXISTS" ]; then
			docker_verify_minimum_env
			docker_init_database_dir "$@"
			note 'Starting temporary server'
			docker_temp_server_start "$@"
			note 'Temporary server started.'
			docker_setup_db
			docker_process_init_files /docker-entrypoint-initdb.d/*
			note 'Stopping temporary server'
			docker_temp_server_stop
			note 'Temporary server stopped'
			echo
			note 'MariaDB init process done. Ready for start up.'
			echo
		fi
	fi
	exec "$@"
}

_main "$@"
