#!/usr/bin/env bash
# hack/guest/run.sh [options] PKG... : run the tests of PKG... (./runtime/docker
# and so on) inside the cgroup v2 guest that hack/guest/image.sh builds.
#
#   1. image.sh builds the guest, or finds it cached;
#   2. each PKG's tests are compiled here, static (CGO_ENABLED=0), with
#      `go test -c`, into the share directory;
#   3. run.sh writes the guest's job there: job.sh (every binary in turn,
#      -test.v, output to out/<pkg>.log and out/test.log), the env (the
#      images of build/images.env, SANDBOXER_REQUIRE=<the row's runtimes>),
#      the deadline, and which runtimes to wait for;
#   4. qemu boots the guest under TCG (software emulation: this machine's
#      /dev/kvm runs only PVM guests) with the image read-only
#      (snapshot=on: writes go to a temporary overlay), the share over 9p
#      (tag "share") and the serial console in out/console.log; in the
#      guest sandboxer-guest.service runs job.sh and powers off;
#   5. out/test.log is streamed to stdout while the guest runs; the exit
#      code is the job's (125: the guest never got to run it; 124: a
#      deadline passed).
#
# The guest's 127.0.0.1:5055 is forwarded to the host's 10.0.2.2:5055 (the
# loopback registry of hack/images.sh), so the image refs of
# build/images.env work unchanged and the guest pulls what a test needs on
# demand (a sandboxer-registry.socket in the guest).
#
# Options:
#   --row ROW          docker (default), podman, podman-rootless, containerd:
#                      the runtimes the guest waits for and SANDBOXER_REQUIRE
#   --run REGEX        -test.run for every binary
#   --test-timeout D   -test.timeout for every binary (default 30m)
#   --deadline SECS    the guest job's deadline (default 2700); qemu itself
#                      is killed 600 s after it
#   --images-env FILE  the stand-in images (default build/images.env)
#   --share DIR        the share (default build/guest/<row>); emptied first
#   --memory MB        guest memory (default 4096)
#   --keep-binaries    keep the test binaries in the share afterwards
#   --preload NAMES    comma-separated stand-ins (busybox,redis,...) to load
#                      into the row's image store before the job, from the
#                      OCI layouts hack/images.sh cached (an archive each on
#                      the share), instead of pulls through slirp
#   --preload-stores S the stores to preload into, blank-separated (default:
#                      the row's own: docker, podman, podman-rootless or
#                      containerd)
#   --job FILE         run FILE in the guest (as root, output in out/job.log)
#                      instead of test binaries; e.g. hack/guest/smoke.sh
#
# Every step has a deadline: go build 15 min per package, the image build
# its own per step (image.sh), the guest --deadline + 600 s.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin

log() { printf 'guest: %s\n' "$*" >&2; }
fail() {
	printf 'guest: error: %s\n' "$*" >&2
	exit 1
}
usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

row=docker
run_re=
test_timeout=30m
deadline=2700
images_env=$repo/build/images.env
share=
memory=4096
keep=0
job=
preload=
preload_stores=
pkgs=()
while (($#)); do
	case "$1" in
	--row) row=${2:?--row needs a value}; shift 2 ;;
	--run) run_re=${2:?--run needs a value}; shift 2 ;;
	--test-timeout) test_timeout=${2:?}; shift 2 ;;
	--deadline) deadline=${2:?}; shift 2 ;;
	--images-env) images_env=${2:?}; shift 2 ;;
	--share) share=${2:?}; shift 2 ;;
	--memory) memory=${2:?}; shift 2 ;;
	--keep-binaries) keep=1; shift ;;
	--job) job=${2:?--job needs a file}; shift 2 ;;
	--preload) preload=${2:?--preload needs image names}; shift 2 ;;
	--preload-stores) preload_stores=${2:?}; shift 2 ;;
	-h | --help) usage ;;
	-*) fail "unknown option $1 (--help lists them)" ;;
	*) pkgs+=("$1"); shift ;;
	esac
done
if [[ -n $job ]]; then
	[[ -f $job ]] || fail "--job $job: no such file"
	((${#pkgs[@]} == 0)) || fail "--job and packages exclude each other"
else
	((${#pkgs[@]})) || fail "no package to test (e.g. ./runtime/docker/)"
fi
preload_stores=${preload_stores:-$row}
[[ $deadline =~ ^[0-9]+$ ]] || fail "--deadline wants seconds, not $deadline"

# The row: which daemons the guest waits for before the job, and the
# environment the tests get for them (the guest's own sockets).
case "$row" in
docker)
	wait_for=docker
	row_env=("SANDBOXER_REQUIRE=docker" "DOCKER_HOST=unix:///var/run/docker.sock")
	;;
podman)
	wait_for=podman
	row_env=("SANDBOXER_REQUIRE=podman" "CONTAINER_HOST=unix:///run/podman/podman.sock")
	;;
podman-rootless)
	wait_for="podman podman-rootless"
	row_env=("SANDBOXER_REQUIRE=podman-rootless" "CONTAINER_HOST=unix:///run/podman/podman.sock"
		"SANDBOXER_PODMAN_ROOTLESS_HOST=unix:///run/user/1000/podman/podman.sock"
		"SANDBOXER_PODMAN_ROOTLESS_USER=sandboxer")
	;;
containerd)
	wait_for=containerd
	row_env=("SANDBOXER_REQUIRE=containerd" "CONTAINERD_ADDRESS=/run/containerd/containerd.sock"
		"CONTAINERD_NAMESPACE=sandboxer")
	;;
*) fail "unknown row $row (docker, podman, podman-rootless, containerd)" ;;
esac

[[ -f $images_env ]] || fail "$images_env does not exist: the stand-in images must be served (make images) and named there"
grep -q '^SANDBOXER_REGISTRY=127.0.0.1:5055$' "$images_env" ||
	fail "$images_env: the guest forwards only 127.0.0.1:5055 to the host (sandboxer-registry.socket); SANDBOXER_REGISTRY is $(sed -n 's/^SANDBOXER_REGISTRY=//p' "$images_env")"
command -v qemu-system-x86_64 >/dev/null || fail "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"

t0=$SECONDS
took() { echo "$((SECONDS - $1))s"; }

# 1. The image.
s=$SECONDS
img=$(hack/guest/image.sh) || fail "the guest image could not be built"
for f in disk.img vmlinuz initrd.img; do [[ -f $img/$f ]] || fail "$img/$f missing"; done
log "image $img ($(took "$s"))"

# 2. The share and the test binaries.
share=${share:-$repo/build/guest/$row}
mkdir -p "$share"
share=$(cd "$share" && pwd)
rm -rf "${share:?}/bin" "$share/out" "$share/images" "$share/job.sh" "$share/deadline" "$share/wait" "$share/env" "$share/preload" "$share/preload.sh" "$share/user-job.sh"
mkdir -p "$share/bin" "$share/out" "$share/images"
# The guest's job runs as root, but say so plainly: anyone may write logs.
chmod 0777 "$share/out"
s=$SECONDS
names=()
for p in "${pkgs[@]+"${pkgs[@]}"}"; do
	name=$(echo "${p#./}" | sed 's:/*$::; s:/:_:g')
	[[ -n $name ]] || fail "cannot name package $p"
	CGO_ENABLED=0 timeout -k 10 900 go test -c -o "$share/bin/$name.test" "$p" ||
		fail "go test -c $p failed (or took over 15 min)"
	[[ -x $share/bin/$name.test ]] || fail "$p has no test files (go test -c wrote nothing)"
	names+=("$name")
done
((${#names[@]} == 0)) || log "compiled ${names[*]} ($(took "$s"), $(du -sh "$share/bin" | cut -f1))"

# The preloads: each image's OCI layout as hack/images.sh cached it (the
# directory named by the ref's tag, the first 12 digits of its input
# hash), archived with its full ref as the manifest's name (the
# annotations docker load, podman load and ctr import read), so that the
# loaded image answers to the ref the tests use.
layouts=${SANDBOXER_CACHE:-$HOME/.cache/sandboxer}/layouts
: >"$share/preload"
IFS=, read -r -a pre <<<"$preload"
for n in "${pre[@]+"${pre[@]}"}"; do
	k=${n^^}
	ref=$(sed -n "s/^SANDBOXER_IMAGE_${k//-/_}=//p" "$images_env")
	[[ -n $ref ]] || fail "--preload $n: $images_env has no SANDBOXER_IMAGE_${k//-/_}"
	mapfile -t found < <(find "$layouts" -maxdepth 1 -name "$n-${ref##*:}*" -type d)
	((${#found[@]} == 1)) || fail "--preload $n: want one layout $layouts/$n-${ref##*:}*, found ${#found[@]} (run make images)"
	tmp=$(mktemp -d)
	cp -r "${found[0]}/." "$tmp/"
	sed -i "s|^\\( *\\)\"mediaType\": \"application/vnd.oci.image.manifest.v1+json\",\$|&\\n\\1\"annotations\": {\"io.containerd.image.name\": \"$ref\", \"org.opencontainers.image.ref.name\": \"$ref\"},|" "$tmp/index.json"
	grep -qF "\"io.containerd.image.name\": \"$ref\"" "$tmp/index.json" || { rm -rf "$tmp"; fail "--preload $n: could not name the manifest in ${found[0]}/index.json"; }
	# Docker 26's own store loads only docker-archive's manifest.json (an
	# OCI layout alone fails with "blobs/json: no such file"): the same
	# blobs, named once more, config digest first, then the layers, in the
	# order of the image manifest (imagetool writes it compact: config,
	# then layers).
	mdigest=$(grep -o '"digest": *"sha256:[0-9a-f]*"' "$tmp/index.json" | head -n 1 | grep -o '[0-9a-f]\{64\}')
	mapfile -t digests < <(grep -o '"digest": *"sha256:[0-9a-f]*"' "$tmp/blobs/sha256/$mdigest" | grep -o '[0-9a-f]\{64\}')
	((${#digests[@]} >= 2)) || { rm -rf "$tmp"; fail "--preload $n: manifest $mdigest names no config and layers"; }
	layers=$(printf ',"blobs/sha256/%s"' "${digests[@]:1}")
	printf '[{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":[%s]}]\n' "${digests[0]}" "$ref" "${layers#,}" >"$tmp/manifest.json"
	tar -C "$tmp" -cf "$share/images/$n.tar" .
	rm -rf "$tmp"
	echo "$n $ref" >>"$share/preload"
done

# 3. The job. The env: the images (only the SANDBOXER_REGISTRY and
# SANDBOXER_IMAGE_ lines: the host's sockets mean nothing in the guest),
# then the row's.
{
	grep -E '^SANDBOXER_(REGISTRY|IMAGE_[A-Z0-9_]+)=' "$images_env"
	printf '%s\n' "${row_env[@]}"
} >"$share/env"
echo "$deadline" >"$share/deadline"
echo "$wait_for" >"$share/wait"
# preload.sh STORE... loads the archives that $share/preload names into
# each STORE (docker, podman, podman-rootless, containerd), each load
# bounded and timed in out/test.log.
cat >"$share/preload.sh" <<'EOF'
#!/bin/bash
# Written by hack/guest/run.sh: runs in the guest, as root.
set -uo pipefail
share=/mnt/share
uid=$(id -u sandboxer)
rc=0
for store in "$@"; do
	while read -r name ref; do
		archive=$share/images/$name.tar
		s=$(date +%s.%N)
		case "$store" in
		docker) timeout 900 docker load -q -i "$archive" ;;
		podman) timeout 900 podman --url unix:///run/podman/podman.sock load -q -i "$archive" ;;
		podman-rootless) timeout 900 runuser -u sandboxer -- env -u CONTAINER_HOST XDG_RUNTIME_DIR="/run/user/$uid" podman load -q -i "$archive" ;;
		containerd) timeout 900 ctr -n "${CONTAINERD_NAMESPACE:-sandboxer}" images import "$archive" ;;
		*) echo "unknown store $store" ;;
		esac >>"$share/out/preload.log" 2>&1
		lrc=$?
		echo "=== guest: preload $name ($ref) into $store: exit $lrc in $(awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')s" | tee -a "$share/out/test.log"
		[ "$lrc" = 0 ] || rc=1
	done <"$share/preload"
done
exit "$rc"
EOF
if [[ -n $job ]]; then
	cp "$job" "$share/user-job.sh"
	printf '#!/bin/bash\n# Written by hack/guest/run.sh: the preloads, then %s.\nbash /mnt/share/preload.sh %s || exit 1\nexec bash /mnt/share/user-job.sh\n' \
		"$job" "$preload_stores" >"$share/job.sh"
else
	{
	cat <<'EOF'
#!/bin/bash
# Written by hack/guest/run.sh: runs in the guest, as root, from
# sandboxer-guest (which bounds it with the deadline).
set -uo pipefail
share=/mnt/share
set -a
# shellcheck disable=SC1091
. "$share/env"
set +a
rc=0
EOF
	printf 'run_re=%q\ntest_timeout=%q\n' "$run_re" "$test_timeout"
	printf 'bash /mnt/share/preload.sh %s || rc=1\n' "$preload_stores"
	cat <<'EOF'
for bin in "$share"/bin/*.test; do
	name=$(basename "$bin" .test)
	# A local copy, in a directory of its own: the binary runs from the
	# guest's disk, not over 9p, with a cwd of its own.
	dir=/var/tmp/sandboxer-tests/$name
	mkdir -p "$dir"
	cp "$bin" "$dir/"
	args=(-test.v -test.count=1 -test.timeout="$test_timeout")
	[ -n "$run_re" ] && args+=(-test.run="$run_re")
	s=$(cut -d' ' -f1 /proc/uptime)
	echo "=== guest: $name ${args[*]} (uptime ${s}s)" | tee -a "$share/out/test.log"
	(cd "$dir" && "./$name.test" "${args[@]}") 2>&1 | tee "$share/out/$name.log" >>"$share/out/test.log"
	brc=${PIPESTATUS[0]}
	e=$(cut -d' ' -f1 /proc/uptime)
	echo "=== guest: $name exit $brc in $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.0f", e - s }')s" | tee -a "$share/out/test.log"
	echo "$name $brc $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.0f", e - s }')" >>"$share/out/binaries"
	[ "$brc" = 0 ] || rc=1
done
exit "$rc"
EOF
	} >"$share/job.sh"
fi
chmod +x "$share/job.sh"

# 4. The guest. qemu runs in the background, bounded by timeout; the log is
# followed until it exits.
console=$share/out/console.log
qemu=(
	qemu-system-x86_64 -accel "tcg,thread=multi" -cpu max -smp 2 -m "$memory"
	-kernel "$img/vmlinuz" -initrd "$img/initrd.img"
	-append "root=/dev/vda rw console=ttyS0 sandboxer.job systemd.show_status=auto panic=10"
	-drive "file=$img/disk.img,format=raw,if=virtio,snapshot=on,cache=unsafe"
	-netdev "user,id=n0" -device "virtio-net-pci,netdev=n0"
	-fsdev "local,id=fs0,path=$share,security_model=none" -device "virtio-9p-pci,fsdev=fs0,mount_tag=share"
	-object "rng-random,id=rng0,filename=/dev/urandom" -device "virtio-rng-pci,rng=rng0"
	-serial "file:$console" -display none -monitor none -no-reboot
)
s=$SECONDS
log "booting the guest (row $row, deadline ${deadline}s; console $console)"
timeout -k 10 "$((deadline + 600))" "${qemu[@]}" </dev/null >"$share/out/qemu.log" 2>&1 &
qpid=$!
# `make env-down` stops a guest still running (timeout passes its TERM to
# qemu) by this file, and removes build/guest.
mkdir -p "$repo/build/run"
echo "$qpid" >"$repo/build/run/guest-$row.pid"
follow=$share/out/test.log
[[ -z $job ]] || follow=$share/out/job.log
touch "$follow"
tail -n +1 -F "$follow" 2>/dev/null &
tpid=$!
qrc=0
wait "$qpid" || qrc=$?
rm -f "$repo/build/run/guest-$row.pid"
# tail is ours (started above): stop it by its PID, after a moment for the
# last lines.
sleep 1
kill "$tpid" 2>/dev/null || true
wait "$tpid" 2>/dev/null || true
log "guest ran $(took "$s") (qemu exit $qrc)"
[[ -s $share/out/guest.log ]] && sed 's/^/guest: | /' "$share/out/guest.log" >&2

# 5. The verdict.
if ((qrc == 124 || qrc == 137)); then
	log "qemu did not finish within $((deadline + 600))s: killed; last console lines:"
	tail -n 20 "$console" >&2 || true
	exit 124
fi
if [[ ! -s $share/out/job.rc ]]; then
	log "the guest never ran the job (qemu exit $qrc); last console lines:"
	tail -n 30 "$console" >&2 || true
	cat "$share/out/qemu.log" >&2 || true
	exit 125
fi
rc=$(cat "$share/out/job.rc")
((keep)) || rm -rf "${share:?}/bin"
if [[ -n $job ]]; then
	log "$row: job $job exit $rc; total $(took "$t0")"
	exit "$rc"
fi
printf 'guest: %s: %s passed, %s failed, %s skipped; job exit %s; total %s\n' "$row" \
	"$(grep -c -- '--- PASS' "$share/out/test.log" || true)" "$(grep -c -- '--- FAIL' "$share/out/test.log" || true)" \
	"$(grep -c -- '--- SKIP' "$share/out/test.log" || true)" "$rc" "$(took "$t0")" >&2
exit "$rc"
