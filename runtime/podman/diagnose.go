package podman

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/roboco/sandboxer/runtime"
)

// diagnoseTimeout bounds each look Diagnose takes (the service's ping, one
// iptables listing).
const diagnoseTimeout = 5 * time.Second

// bridgeNFPath says whether br_netfilter hands bridged IPv4 frames to
// iptables.
const bridgeNFPath = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// Diagnose reports what the service and this host lack for the network
// contract (it implements runtime.Diagnoser): isolate=strict (Podman 4.6
// and later), and, for a rootful service on this host, a FORWARD chain
// that lets the containers of one internal network reach each other.
// A service that does not answer is reported by the caller's own checks,
// not here.
func (r *Runtime) Diagnose(ctx context.Context) []runtime.Diagnostic {
	ctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	c, err := r.connect(ctx, runtime.OpVersion, "")
	if err != nil {
		return nil
	}
	var out []runtime.Diagnostic
	if !c.svc.strictIsolation() {
		out = append(out, runtime.Diagnostic{Check: "podman-isolation", Problem: fmt.Sprintf(
			"Podman (libpod API %s) has no isolate=strict (Podman 4.6 and later): containers on its default network reach sandboxes on plain (host-mode) networks and are reached from them; upgrade Podman, or use private networks (--private)",
			c.svc.apiVersion)})
	}
	if c.svc.rootless || !r.local() {
		return out
	}
	nf, err := os.ReadFile(bridgeNFPath)
	if err != nil {
		return out
	}
	rules, err := exec.CommandContext(ctx, "iptables", "-S", "FORWARD").Output()
	if err != nil {
		return out
	}
	if forwardDropsBridged(string(nf), string(rules)) {
		out = append(out, runtime.Diagnostic{Check: "podman-internal-forward", Problem: "br_netfilter sends bridged frames through iptables FORWARD, whose policy is DROP, and no rule accepts those of a podman bridge: " +
			"containers of one internal (private) network cannot reach each other; add `iptables -I FORWARD -i podman+ -m physdev --physdev-is-bridged -j ACCEPT` (hack/env/podman.sh does)"})
	}
	return out
}

// forwardDropsBridged reports, from bridge-nf-call-iptables and the
// output of `iptables -S FORWARD`, whether frames bridged within a podman
// bridge meet a DROP policy with no rule of the form hack/env/podman.sh
// adds before it.
func forwardDropsBridged(bridgeNF, forwardRules string) bool {
	if strings.TrimSpace(bridgeNF) != "1" {
		return false
	}
	drop := false
	for _, line := range strings.Split(forwardRules, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "-P" && f[1] == "FORWARD":
			drop = f[2] == "DROP" || f[2] == "REJECT"
		case len(f) > 0 && f[0] == "-A" && strings.Contains(line, "-i podman+") &&
			strings.Contains(line, "--physdev-is-bridged") && strings.HasSuffix(strings.TrimSpace(line), "-j ACCEPT"):
			return false
		}
	}
	return drop
}
