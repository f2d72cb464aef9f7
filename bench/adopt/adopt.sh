#!/usr/bin/env bash
# bench/adopt/adopt.sh: what a Go consumer pays to adopt sandboxtest, side by
# side with testcontainers-go, in one run (issue 28). Two consumer modules,
# each one test that takes a postgres database and pings it with pgx:
#
#   sandboxtest      sandboxtest.PostgresDB, this checkout (replace directive)
#   testcontainers   testcontainers-go $TC_VERSION modules/postgres
#
# For each, with the module cache warm (go mod tidy/download first) and an
# EMPTY build cache (GOCACHE a fresh temp dir per build): cold `go test -c`
# wall time, the test binary's size, the packages linked (`go list -deps
# -test`), the go.sum lines; and sandboxtest's figures as ratios of
# testcontainers-go's. Builds alternate between the two, ROUNDS times
# (default 1); the median is reported. The tests are compiled, not run.
#
# Writes bench/results/adopt.md and adopt.json. Usage:
#   bench/adopt/adopt.sh [ROUNDS]
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-${SANDBOXER_ADOPT_ROUNDS:-1}}
TC_VERSION=${TC_VERSION:-v0.45.0}
out=${SANDBOXER_ADOPT_OUT:-$root/bench/results}
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

step() { printf '[adopt %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# A snapshot of this checkout (tracked and untracked-but-not-ignored
# files), so that edits made while the bench runs do not reach its builds.
mkdir -p "$work/sandboxtest" "$work/testcontainers" "$work/src"
(cd "$root" && git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf -) | tar -C "$work/src" -xf -
cat >"$work/sandboxtest/go.mod" <<EOM
module example.com/adopt/sandboxtest

go $(cd "$root" && go list -m -f '{{.GoVersion}}')

require github.com/roboco/sandboxer v0.0.0

replace github.com/roboco/sandboxer => $work/src
EOM
cat >"$work/sandboxtest/ping_test.go" <<'EOM'
package adopt

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/roboco/sandboxer/sandboxtest"
)

func TestPing(t *testing.T) {
	db := sandboxtest.PostgresDB(t, sandboxtest.Migrations{})
	conn, err := pgx.Connect(context.Background(), db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
EOM
cat >"$work/testcontainers/go.mod" <<EOM
module example.com/adopt/testcontainers

go $(cd "$root" && go list -m -f '{{.GoVersion}}')
EOM
cat >"$work/testcontainers/ping_test.go" <<'EOM'
package adopt

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/postgres"
)

func TestPing(t *testing.T) {
	ctx := context.Background()
	ctr, err := postgres.Run(ctx, "postgres:16-alpine", postgres.BasicWaitStrategies())
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatal(err)
	}
	url, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
EOM

# sandboxtest-docker: the same consumer on a copy of the snapshot whose
# sandboxtest links the docker adapter only, to show what linking podman
# by default costs (SANDBOXER_ADOPT_DOCKER_ONLY=0 leaves it out).
consumers=(testcontainers sandboxtest)
if [ "${SANDBOXER_ADOPT_DOCKER_ONLY:-1}" = 1 ]; then
	consumers+=(sandboxtest-docker)
	cp -r "$work/src" "$work/src-docker"
	sed -i '/runtime\/podman"/d' "$work/src-docker/sandboxtest/runtimes.go"
	mkdir -p "$work/sandboxtest-docker"
	sed "s|$work/src|$work/src-docker|; s|adopt/sandboxtest|adopt/sandboxtest-docker|" "$work/sandboxtest/go.mod" >"$work/sandboxtest-docker/go.mod"
	cp "$work/sandboxtest/ping_test.go" "$work/sandboxtest-docker/"
	(cd "$work/sandboxtest-docker" && go mod tidy >/dev/null && go list -deps -test ./ >/dev/null)
fi

# Warm the module cache: resolve and download everything each consumer
# needs (this part is not measured).
step "resolving modules (warm module cache; not measured)"
(cd "$work/sandboxtest" && go mod tidy >/dev/null && go mod download all >/dev/null && go list -deps -test ./ >/dev/null)
(cd "$work/testcontainers" && go get "github.com/testcontainers/testcontainers-go@$TC_VERSION" "github.com/testcontainers/testcontainers-go/modules/postgres@$TC_VERSION" "github.com/jackc/pgx/v5@$(cd "$root" && go list -m -f '{{.Version}}' github.com/jackc/pgx/v5)" >/dev/null
 go mod tidy >/dev/null && go mod download all >/dev/null && go list -deps -test ./ >/dev/null)

# build NAME: one cold `go test -c` of consumer NAME, in seconds.
build() {
	local dir=$work/$1 cache
	cache=$(mktemp -d "$work/gocache.XXXX")
	local start end
	start=$(date +%s.%N)
	(cd "$dir" && GOCACHE=$cache GOFLAGS=-mod=mod go test -c -o "$work/$1.test" ./ >&2) || return 1
	end=$(date +%s.%N)
	chmod -R u+w "$cache"; rm -rf "$cache"
	echo "$end - $start" | bc
}

declare -A times
for ((r = 1; r <= rounds; r++)); do
	# Alternate which goes first, so neither always meets the other's load.
	order=("${consumers[@]}")
	((r % 2 == 0)) && mapfile -t order < <(printf '%s\n' "${consumers[@]}" | tac)
	for name in "${order[@]}"; do
		step "round $r/$rounds: cold go test -c of $name"
		s=$(build "$name") || { step "$name: go test -c failed"; exit 1; }
		times[$name]+="$s "
		step "round $r/$rounds: $name built in ${s}s"
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
declare -A secs size pkgs sums
for name in "${consumers[@]}"; do
	secs[$name]=$(printf '%.1f' "$(echo "${times[$name]}" | median)")
	size[$name]=$(stat -c %s "$work/$name.test")
	pkgs[$name]=$(cd "$work/$name" && go list -deps -test ./ | wc -l)
	sums[$name]=$(wc -l <"$work/$name/go.sum")
done
linked=$(cd "$work/sandboxtest" && go list -deps -test ./ | grep -E '^github.com/roboco/sandboxer/runtime/(docker|podman|containerd|kubernetes)$' | sed 's|.*/||' | paste -sd, -)
ratio() { echo "scale=2; $1 / $2" | bc | sed 's/^\./0./'; }
r_secs=$(ratio "${secs[sandboxtest]}" "${secs[testcontainers]}")
r_size=$(ratio "${size[sandboxtest]}" "${size[testcontainers]}")
r_pkgs=$(ratio "${pkgs[sandboxtest]}" "${pkgs[testcontainers]}")
r_sums=$(ratio "${sums[sandboxtest]}" "${sums[testcontainers]}")
mb() { echo "scale=1; $1 / 1000000" | bc | sed 's/^\./0./'; }
met() { if (($(echo "$1 <= 1" | bc))); then echo met; else echo "NOT met"; fi; }

mkdir -p "$out"
when=$(date -u +'%Y-%m-%d %H:%M UTC')
cat >"$out/adopt.json" <<EOJ
{
  "when": "$when",
  "rounds": $rounds,
  "go": "$(go env GOVERSION)",
  "testcontainers_version": "$TC_VERSION",
  "sandboxtest_adapters": "$linked",
  "sandboxtest": {"cold_test_c_s": ${secs[sandboxtest]}, "binary_bytes": ${size[sandboxtest]}, "packages": ${pkgs[sandboxtest]}, "go_sum_lines": ${sums[sandboxtest]}},
  "testcontainers": {"cold_test_c_s": ${secs[testcontainers]}, "binary_bytes": ${size[testcontainers]}, "packages": ${pkgs[testcontainers]}, "go_sum_lines": ${sums[testcontainers]}},
  "ratio": {"cold_test_c": $r_secs, "binary": $r_size, "packages": $r_pkgs, "go_sum_lines": $r_sums}
}
EOJ
cat >"$out/adopt.md" <<EOM
# sandboxer bench: light to adopt (issue 28)

$when, \`bench/adopt/adopt.sh $rounds\` ($(go env GOVERSION), $(nproc) CPUs, shared
machine): one consumer test that takes a postgres database and pings it
with pgx, built with an empty build cache (module cache warm), median of
$rounds round(s), the two consumers alternating. sandboxtest links the
adapters: $linked.

| consumer | cold \`go test -c\` | test binary | packages linked | go.sum lines |
|---|---:|---:|---:|---:|
| testcontainers-go $TC_VERSION \`modules/postgres\` | ${secs[testcontainers]} s | $(mb "${size[testcontainers]}") MB | ${pkgs[testcontainers]} | ${sums[testcontainers]} |
| \`sandboxtest.PostgresDB\` | ${secs[sandboxtest]} s (**${r_secs}x**) | $(mb "${size[sandboxtest]}") MB (**${r_size}x**) | ${pkgs[sandboxtest]} (${r_pkgs}x) | ${sums[sandboxtest]} (${r_sums}x) |
$(if [ -n "${secs[sandboxtest-docker]:-}" ]; then
	echo "| same, sandboxtest linking docker only (what podman costs) | ${secs[sandboxtest-docker]} s ($(ratio "${secs[sandboxtest-docker]}" "${secs[testcontainers]}")x) | $(mb "${size[sandboxtest-docker]}") MB ($(ratio "${size[sandboxtest-docker]}" "${size[testcontainers]}")x) | ${pkgs[sandboxtest-docker]} | ${sums[sandboxtest-docker]} |"
fi)

Goal (no slower, no larger than testcontainers-go): build time $(met "$r_secs"), binary $(met "$r_size").
EOM
cat "$out/adopt.md"
