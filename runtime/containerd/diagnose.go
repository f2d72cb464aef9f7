package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/roboco/sandboxer/runtime"
)

// cniPlugins are the CNI plugins the adapter's networks use: bridge with
// host-local IPAM, portmap for published ports, firewall, and loopback for
// the container's lo.
var cniPlugins = []string{"bridge", "host-local", "portmap", "firewall", "loopback"}

// Diagnose reports what this host lacks for the adapter (it implements
// runtime.Diagnoser): root, which CNI networking and runc need, and the CNI
// plugins in the adapter's plugin directories.
func (r *Runtime) Diagnose(context.Context) []runtime.Diagnostic {
	var out []runtime.Diagnostic
	if os.Geteuid() != 0 {
		out = append(out, runtime.Diagnostic{Check: "root", Problem: "the containerd adapter needs root (CNI networking, runc): run sandboxer as root"})
	}
	if missing := missingPlugins(r.cniDirs); len(missing) > 0 {
		out = append(out, runtime.Diagnostic{Check: "cni-plugins", Problem: fmt.Sprintf("no CNI plugin %s in %v: install containernetworking-plugins",
			strings.Join(missing, ", "), r.cniDirs)})
	}
	return out
}

// missingPlugins lists the cniPlugins that none of dirs holds.
func missingPlugins(dirs []string) []string {
	var missing []string
	for _, p := range cniPlugins {
		found := false
		for _, d := range dirs {
			if fi, err := os.Stat(filepath.Join(d, p)); err == nil && !fi.IsDir() {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, p)
		}
	}
	return missing
}
