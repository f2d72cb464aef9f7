#!/usr/bin/env bash
# Entrypoint of sandboxer's redis stand-in. It follows the contract of the
# official redis image's docker-entrypoint.sh:
#   - a first argument starting with '-' or ending in .conf means
#     `redis-server <args>`;
#   - `redis-server` started as root hands the working directory (/data) to
#     the redis user and re-executes itself as redis (uid 999); when it
#     cannot switch users (no CAP_SETUID/CAP_SETGID: a trimmed capability
#     set), it says so and runs the server as root, as the official one does;
#   - umask 0077 unless one was set;
#   - arguments are appended after the user's, as the official entrypoint
#     appends `--loadmodule <module>` for each of its modules: here
#     `--protected-mode no`, unless the command line or the config file
#     sets protected mode (the official image compiles that default in,
#     Debian's build does not). So `redis-server -` reads its config from
#     stdin only while `-` is the first argument, as with the real image.
set -e

if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then
	set -- redis-server "$@"
fi

if [ "$1" = 'redis-server' ] && [ "$(id -u)" = '0' ]; then
	if setpriv --reuid=redis --regid=redis --init-groups true 2>/dev/null; then
		find . \! -user redis -exec chown redis '{}' +
		exec env HOME=/var/lib/redis USER=redis \
			setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
	fi
	echo "cannot switch to the redis user (no CAP_SETUID/CAP_SETGID): running redis-server as root" >&2
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
	set -- redis-server "${conf[@]}" "$@"
	if [ -z "$explicit" ]; then
		set -- "$@" --protected-mode no
	fi
fi

um="$(umask)"
if [ "$um" = '0022' ]; then
	umask 0077
fi

exec "$@"
