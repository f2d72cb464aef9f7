#!/usr/bin/env bash
# pause.sh WORKDIR : the busybox stand-in whose command sleeps forever: the
# pod sandbox ("pause") image the Kubernetes test cluster's containerd pins.
# sandboxer-inputs: busybox.sh /bin/busybox
exec "$(dirname "${BASH_SOURCE[0]}")/busybox.sh" "$1" --pause
