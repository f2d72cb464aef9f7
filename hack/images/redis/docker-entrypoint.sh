#!/usr/bin/env bash
# Entrypoint of sandboxer's redis stand-in. It follows the contract of the
# official redis image's docker-entrypoint.sh:
#   - a first argument starting with '-' or ending in .conf means
#     `redis-server <args>`;
#   - `redis-server` started as root hands the working directory (/data) to
#     the redis user and re-executes itself as redis (uid 999);
#   - umask 0077 unless one was set;
#   - protected mode is off unless the command line or the config file sets
#     it: the official image compiles that default in, Debian's build does
#     not, so `--protected-mode no` is inserted before the user's options
#     (which still override it).
set -e

if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
	set -- redis-server "$@"
fi

if [ "$1" = 'redis-server' ] && [ "$(id -u)" = '0' ]; then
	find . \! -user redis -exec chown redis '{}' +
	exec env HOME=/var/lib/redis USER=redis \
		setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
fi

if [ "$1" = 'redis-server' ]; then
	shift
	conf=()
	# A first argument that is not an option is the config file ("-" is stdin).
	if [ $# -gt 0 ] && { [ "$1" = '-' ] || [ "${1#-}" = "$1" ]; }; then
		conf=("$1")
		shift
	fi
	explicit=
	for arg; do
		if [ "$arg" = '--protected-mode' ]; then
			explicit=1
		fi
	done
	if [ ${#conf[@]} -gt 0 ] && [ -f "${conf[0]}" ] &&
		grep -qiE '^[[:space:]]*protected-mode[[:space:]]' "${conf[0]}"; then
		explicit=1
	fi
	if [ -z "$explicit" ]; then
		set -- redis-server "${conf[@]}" --protected-mode no "$@"
	else
		set -- redis-server "${conf[@]}" "$@"
	fi
fi

um="$(umask)"
if [ "$um" = '0022' ]; then
	umask 0077
fi

exec "$@"
