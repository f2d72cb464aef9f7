package postgres

import "github.com/roboco/sandboxer/engines"

// Compile-time proof that postgres starts warm and logs in.
var (
	_ engines.Warmer      = Engine{}
	_ engines.WireChecker = Engine{}
)

// WarmKey is the version of the recipe below.
func (Engine) WarmKey() string { return "postgres-warm-2" }

// TemplateEntrypoint runs the image's docker-entrypoint.sh (the official
// image's contract) in the background and, once the server it ends in has
// stopped, sleeps, so that the data can be read out.
func (Engine) TemplateEntrypoint() []string {
	return []string{"/bin/sh", "-c", `docker-entrypoint.sh "$@" & wait $!; exec sleep 2147483647`, "sandboxer-warm-template"}
}

// StopServer is `pg_ctl stop -m fast -w` as postgres: a clean shutdown,
// so that the template needs no crash recovery.
func (Engine) StopServer() ([]string, string) {
	return []string{"sh", "-c", `exec pg_ctl stop -D "${PGDATA:-/var/lib/postgresql/data}" -m fast -w`}, "postgres"
}

// pgWarmScript is the warm entrypoint (POSIX sh, run as root). Its
// arguments are the tmpfs path / tar file pairs, then "--", then the cold
// command. It drops to postgres with the image's own tool (gosu, su-exec or
// setpriv) and never runs the image's docker-entrypoint.sh, whose chown of
// the whole data directory is what a warm start saves. The password goes
// to the single-user server on stdin, never in argv, and
// log_min_error_statement=panic keeps the statement out of its log; any
// ERROR or FATAL fails the start (exit 1) before the server listens.
const pgWarmScript = `set -eu
while [ "$1" != "--" ]; do
	tar -C "$1" -xpf "$2"
	shift 2
done
shift
if command -v gosu >/dev/null 2>&1; then drop="gosu postgres"
elif command -v su-exec >/dev/null 2>&1; then drop="su-exec postgres"
elif command -v setpriv >/dev/null 2>&1; then drop="setpriv --reuid=postgres --regid=postgres --init-groups"
else echo "sandboxer warm start: no gosu, su-exec or setpriv in the image" >&2; exit 1
fi
export HOME=/var/lib/postgresql USER=postgres
# The socket directory, as the image's entrypoint makes it (a runtime may
# mount a fresh tmpfs on /run).
mkdir -p /var/run/postgresql
chown postgres:postgres /var/run/postgresql
chmod 3777 /var/run/postgresql
: "${PGDATA:=/var/lib/postgresql/data}"
user=$(printf '%s' "${POSTGRES_USER:-postgres}" | sed 's/"/""/g')
pw=$(printf '%s' "$POSTGRES_PASSWORD" | sed "s/'/''/g")
out=$(printf 'ALTER ROLE "%s" WITH PASSWORD '"'"'%s'"'"';\n' "$user" "$pw" |
	$drop postgres --single -D "$PGDATA" -c log_min_error_statement=panic -c log_min_messages=fatal -c exit_on_error=on postgres 2>&1 >/dev/null) || {
	echo "sandboxer warm start: setting the password failed" >&2; exit 1; }
case "$out" in
*ERROR*|*FATAL*|*PANIC*) echo "sandboxer warm start: setting the password failed" >&2; exit 1 ;;
esac
exec $drop "$@"
`

// WarmEntrypoint unpacks files and starts the server; see pgWarmScript.
func (Engine) WarmEntrypoint(files []engines.WarmFile) []string {
	argv := []string{"/bin/sh", "-c", pgWarmScript, "sandboxer-warm"}
	for _, f := range files {
		argv = append(argv, f.Path, f.File)
	}
	return append(argv, "--")
}
