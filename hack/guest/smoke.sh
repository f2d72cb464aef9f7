#!/bin/bash
# hack/guest/smoke.sh : a job for `hack/guest/run.sh --job hack/guest/smoke.sh`
# (it runs in the guest, as root): what each runtime says about cgroup v2,
# and, when the host's registry answers through the guest's 127.0.0.1:5055,
# the time of a pull and one limited busybox run per runtime. Every command
# is bounded; a failure is reported and the next one runs.
set -uo pipefail
set -a
# shellcheck disable=SC1091
. /mnt/share/env
set +a
uid=$(id -u sandboxer)
# The rootless user's own podman (its own storage, its own user session);
# CONTAINER_HOST (the rootful socket, from the row's env) must not follow it.
rl=(runuser -u sandboxer -- env -u CONTAINER_HOST XDG_RUNTIME_DIR="/run/user/$uid" DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus")

# t SECONDS LABEL CMD... : run CMD bounded, and say how long it took.
t() {
	local secs=$1 label=$2 s rc=0
	shift 2
	s=$(date +%s.%N)
	echo "--- $label"
	timeout -k 5 "$secs" "$@" 2>&1 || rc=$?
	echo "--- $label: exit $rc in $(awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')s"
}

t 10 "cgroup root" sh -c 'stat -fc %T /sys/fs/cgroup; cat /sys/fs/cgroup/cgroup.controllers /sys/fs/cgroup/cgroup.subtree_control'
t 10 "rootless user's delegated controllers" cat "/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service/cgroup.controllers"
t 60 "docker info" docker info --format 'docker {{.ServerVersion}} cgroup v{{.CgroupVersion}} driver {{.CgroupDriver}} runtime {{.DefaultRuntime}} storage {{.Driver}}'
t 60 "podman info (rootful)" podman info --format 'podman {{.Version.Version}} cgroup {{.Host.CgroupsVersion}} manager {{.Host.CgroupManager}} controllers {{.Host.CgroupControllers}} runtime {{.Host.OCIRuntime.Name}}'
t 120 "podman info (rootless)" "${rl[@]}" podman info --format 'podman {{.Version.Version}} cgroup {{.Host.CgroupsVersion}} manager {{.Host.CgroupManager}} controllers {{.Host.CgroupControllers}} runtime {{.Host.OCIRuntime.Name}} network {{.Host.NetworkBackend}}'
t 30 "containerd" sh -c 'containerd --version; ctr version'

bb=${SANDBOXER_IMAGE_BUSYBOX:-}
[ -n "$bb" ] || { echo "--- no SANDBOXER_IMAGE_BUSYBOX: no runs"; exit 0; }
# Pull when the host's registry answers through the guest's 127.0.0.1:5055;
# else only what run.sh --preload loaded is there (the runs never pull).
pull=0
# shellcheck disable=SC2016 # the child bash expands it
timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/5055 && printf "GET /v2/ HTTP/1.0\r\n\r\n" >&3 && grep -qi "^Docker-Distribution-API-Version" <&3' 2>/dev/null && pull=1
echo "--- registry behind 127.0.0.1:5055: $([ "$pull" = 1 ] && echo answers || echo 'does not answer (no pulls)')"
limits='cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max /sys/fs/cgroup/pids.max'
lim=(--memory 64m --cpus 0.5 --pids-limit 64)
[ "$pull" = 0 ] || t 300 "docker pull busybox" docker pull -q "$bb"
t 300 "docker run with limits" docker run --rm --pull never "${lim[@]}" "$bb" sh -c "$limits"
[ "$pull" = 0 ] || t 300 "podman pull busybox (rootful)" podman pull -q "$bb"
t 300 "podman run with limits (rootful)" podman run --rm --pull never "${lim[@]}" "$bb" sh -c "$limits"
[ "$pull" = 0 ] || t 300 "podman pull busybox (rootless)" "${rl[@]}" podman pull -q "$bb"
t 300 "podman run with limits (rootless)" "${rl[@]}" podman run --rm --pull never "${lim[@]}" "$bb" sh -c "$limits"
[ "$pull" = 0 ] || t 300 "ctr pull busybox" ctr -n sandboxer images pull --plain-http "$bb"
# ctr's default spec has no cgroup mount and no cgroup namespace (the
# adapter adds both): the limits are read from the guest's side instead.
# shellcheck disable=SC2016 # the child sh expands it, with the image as $1
t 300 "ctr run with limits" sh -c '
	ctr -n sandboxer run -d --memory-limit 67108864 --cpu-quota 50000 --cpu-period 100000 "$1" smoke sleep 60 >/dev/null &&
	cg=$(sed -n "s/^0:://p" /proc/$(ctr -n sandboxer task ls | awk "\$1 == \"smoke\" { print \$2 }")/cgroup) &&
	cd "/sys/fs/cgroup$cg" && cat memory.max cpu.max pids.max
	rc=$?
	ctr -n sandboxer task kill -s SIGKILL smoke; sleep 1; ctr -n sandboxer task rm -f smoke; ctr -n sandboxer container rm smoke
	exit $rc' _ "$bb"
exit 0
