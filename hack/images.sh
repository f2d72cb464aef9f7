#!/usr/bin/env bash
# hack/images.sh [NAME...] : build, serve and push sandboxer's offline
# stand-in images (what `make images` runs). Idempotent, and fast when warm:
#
#   - imagetool (hack/imagetool) is built once per source hash into the cache;
#   - each image (one per script hack/images/<name>.sh: busybox,
#     busybox-volume, pause, postgres, postgres18, redis, mongo, mariadb)
#     has an input hash over its script
#     hack/images/<name>.sh, hack/images/common.sh, its asset folder
#     hack/images/<name>/, the files its script names on a
#     "# sandboxer-inputs:" line, and imagetool's sources; its OCI layout
#     $CACHE/layouts/<name>-<hash> is built (in parallel with the others)
#     only when absent;
#   - a registry is made to answer on 127.0.0.1:$SANDBOXER_REGISTRY_PORT
#     (default 5055): when nothing answers, `imagetool serve` is started
#     detached (PID in build/run/registry.pid, log in build/run/registry.log),
#     with its blobs on disk under $CACHE/registry;
#   - every layout is pushed as 127.0.0.1:PORT/sandboxer/<name>:<hash12>, and
#     build/images.env.images gets SANDBOXER_REGISTRY and one
#     SANDBOXER_IMAGE_<NAME> line per image.
#
# NAME... restricts the run to those images (their env lines are updated,
# the others' kept). CACHE is ${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}.
# Build logs: build/run/images-<name>.log.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export SANDBOXER_CACHE="${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}"
cache=$SANDBOXER_CACHE
port=${SANDBOXER_REGISTRY_PORT:-5055}
registry=127.0.0.1:$port
run=$repo/build/run
envfile=$repo/build/images.env.images
images=$repo/hack/images
mkdir -p "$run" "$cache/layouts" "$cache/bin" "$cache/work" "$cache/registry"
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin

say() { printf 'images: %s\n' "$*"; }
fail() {
	printf 'images: error: %s\n' "$*" >&2
	exit 1
}

# Every image is a script of hack/images/ (common.sh is their library):
# a new stand-in is its script, with no list here to edit.
all=()
for f in "$images"/*.sh; do
	n=${f##*/}
	n=${n%.sh}
	[[ "$n" == common ]] || all+=("$n")
done
if (($#)); then
	names=("$@")
	for n in "${names[@]}"; do
		[[ -f "$images/$n.sh" ]] || fail "unknown image $n (no hack/images/$n.sh)"
	done
else
	names=("${all[@]}")
fi

# hash_files FILE... : one sha256 over the files' relative names and contents.
hash_files() {
	local f
	for f in "$@"; do
		printf '%s  %s\n' "$(sha256sum <"$f" | cut -d' ' -f1)" "${f#"$repo"/}"
	done | sha256sum | cut -d' ' -f1
}

# imagetool: built once per source hash.
mapfile -t tool_srcs < <(find "$repo/hack/imagetool" -maxdepth 1 -name '*.go' ! -name '*_test.go' | LC_ALL=C sort)
tool_hash=$(hash_files "${tool_srcs[@]}")
imagetool=$cache/bin/imagetool-${tool_hash:0:12}
if [[ ! -x "$imagetool" ]]; then
	start=$SECONDS
	go build -trimpath -o "$imagetool.tmp" ./hack/imagetool
	mv "$imagetool.tmp" "$imagetool"
	say "imagetool built in $((SECONDS - start))s"
fi

# inputs NAME : the files whose contents make NAME's input hash, one a line.
inputs() {
	local name=$1 script="$images/$1.sh" extra f words extras=()
	# A "# sandboxer-inputs:" line lists blank-separated paths (split, never
	# globbed).
	while read -r -a words; do
		extras+=("${words[@]}")
	done < <(sed -n 's/^# sandboxer-inputs://p' "$script")
	{
		printf '%s\n' "$script" "$images/common.sh" "${tool_srcs[@]}"
		[[ -d "$images/$name" ]] && find "$images/$name" -type f
		for extra in "${extras[@]}"; do
			case "$extra" in
			/*) f=$extra ;;
			*) f=$images/$extra ;;
			esac
			[[ -f "$f" ]] || fail "$script: declared input $extra does not exist"
			printf '%s\n' "$f"
			if [[ "$f" == "$images"/*.sh && -d "${f%.sh}" ]]; then
				find "${f%.sh}" -type f
			fi
		done
	} | LC_ALL=C sort -u
}

# build_one NAME HASH : make $cache/layouts/NAME-HASH if absent; writes
# "built SECONDS" or "cached 0" to $status_dir/NAME.
build_one() {
	local name=$1 hash=$2 layout="$cache/layouts/$1-$2" log="$run/images-$1.log" start=$SECONDS work
	exec 8>"$cache/layouts/.$name.lock"
	flock 8
	if [[ -f "$layout/index.json" ]]; then
		touch "$layout"
		echo "cached 0" >"$status_dir/$name"
		return 0
	fi
	work=$(mktemp -d "$cache/work/$name-${hash:0:12}.XXXXXX")
	if ! {
		echo "== $(date -u +%FT%TZ) $images/$name.sh $work"
		"$images/$name.sh" "$work" &&
			"$imagetool" build --rootfs "$work/rootfs.tar" --config "$work/config.json" --layout "$work/layout"
	} >"$log" 2>&1; then
		rm -rf --one-file-system "$work"
		echo "failed $((SECONDS - start))" >"$status_dir/$name"
		return 1
	fi
	mv "$work/layout" "$layout"
	rm -rf --one-file-system "$work"
	# Layouts of this image that no checkout used for a week go.
	find "$cache/layouts" -mindepth 1 -maxdepth 1 -name "$name-*" ! -name "$name-$hash" -mtime +7 \
		-exec rm -rf --one-file-system {} + 2>/dev/null || true
	echo "built $((SECONDS - start))" >"$status_dir/$name"
}

status_dir=$(mktemp -d)
trap 'rm -rf "$status_dir"' EXIT
declare -A hash pid
for n in "${names[@]}"; do
	inputs "$n" >"$status_dir/$n.inputs" || exit 1
	mapfile -t files <"$status_dir/$n.inputs"
	hash[$n]=$(hash_files "${files[@]}")
	build_one "$n" "${hash[$n]}" &
	pid[$n]=$!
done
failed=()
for n in "${names[@]}"; do
	wait "${pid[$n]}" || failed+=("$n")
done
for n in "${names[@]}"; do
	read -r what secs <"$status_dir/$n" || { what=failed secs='?'; }
	printf 'images: %-15s %-7s %4ss  %s\n' "$n" "$what" "$secs" "$registry/sandboxer/$n:${hash[$n]:0:12}"
done
if ((${#failed[@]})); then
	for n in "${failed[@]}"; do
		printf '\n--- last lines of %s ---\n' "$run/images-$n.log" >&2
		tail -n 25 "$run/images-$n.log" >&2 || true
	done
	fail "build failed: ${failed[*]}"
fi

# registry_answers : true when a registry answers GET /v2/ on $port.
registry_answers() {
	# shellcheck disable=SC2016 # the child bash expands it, with the port as $1
	timeout 2 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
		grep -qi "^Docker-Distribution-API-Version: registry/2.0" <&3
	' _ "$port" 2>/dev/null
}

# One start at a time per port, across checkouts sharing the cache.
exec 9>"$cache/registry/.start-$port.lock"
flock 9
if registry_answers; then
	say "registry answering on $registry"
else
	# shellcheck disable=SC2016 # the child bash expands it, with the port as $1
	if timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$port" 2>/dev/null; then
		fail "port $port is taken by something that is not a registry (set SANDBOXER_REGISTRY_PORT)"
	fi
	# 8>&- 9>&-: the registry must not inherit the lock descriptors, or it
	# would hold the start lock for its whole life and the next run would
	# wait on it forever.
	setsid nohup "$imagetool" serve --addr "$registry" --blobs "$cache/registry/blobs" \
		>>"$run/registry.log" 2>&1 </dev/null 8>&- 9>&- &
	echo $! >"$run/registry.pid"
	deadline=$((SECONDS + 15))
	until registry_answers; do
		if ! kill -0 "$(cat "$run/registry.pid")" 2>/dev/null; then
			tail -n 20 "$run/registry.log" >&2
			fail "registry exited at start (log: $run/registry.log)"
		fi
		((SECONDS < deadline)) || fail "registry did not answer on $registry within 15s (log: $run/registry.log)"
		sleep 0.2
	done
	say "registry started on $registry (pid $(cat "$run/registry.pid"), log build/run/registry.log)"
fi
exec 9>&-

declare -A ref
for n in "${names[@]}"; do
	ref[$n]=$registry/sandboxer/$n:${hash[$n]:0:12}
	"$imagetool" push --layout "$cache/layouts/$n-${hash[$n]}" --ref "${ref[$n]}" 2>>"$run/images-push.log" ||
		fail "push ${ref[$n]} failed (log: $run/images-push.log)"
done

# build/images.env.images: this run's refs, merged with the other images'
# lines of a previous run when only some images were named.
declare -A env
if [[ -f "$envfile" ]]; then
	while IFS='=' read -r k v; do
		[[ "$k" == SANDBOXER_* ]] && env[$k]=$v
	done <"$envfile"
fi
env[SANDBOXER_REGISTRY]=$registry
for n in "${names[@]}"; do
	k=${n^^}
	env[SANDBOXER_IMAGE_${k//-/_}]=${ref[$n]}
done
{
	echo "# Written by hack/images.sh: the offline stand-in images it serves."
	echo "SANDBOXER_REGISTRY=${env[SANDBOXER_REGISTRY]}"
	for n in "${all[@]}"; do
		k=${n^^}
		k=SANDBOXER_IMAGE_${k//-/_}
		if [[ -n "${env[$k]:-}" ]]; then
			echo "$k=${env[$k]}"
		fi
	done
} >"$envfile.tmp"
mv "$envfile.tmp" "$envfile"
say "wrote ${envfile#"$repo"/}"
