#!/usr/bin/env bash
# busybox-volume.sh WORKDIR : the busybox stand-in whose config declares
# VOLUME /data (for "remove also deletes anonymous volumes").
# sandboxer-inputs: busybox.sh /bin/busybox
exec "$(dirname "${BASH_SOURCE[0]}")/busybox.sh" "$1" --volume
