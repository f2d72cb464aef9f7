package bench

import (
	"fmt"

	"github.com/roboco/sandboxer/runtime"
)

// Mode is how a row's sandboxes and baselines are reached.
type Mode string

// Modes of a row.
const (
	// ModeHost: each container publishes its port on the host's
	// 127.0.0.1, and clients dial that (every runtime that can).
	ModeHost Mode = "host"
	// ModeNetwork: the containers join a network made for the run
	// (CreateNetwork) and clients dial their address on it, the
	// provisioner with Options.Network; for a runtime that publishes
	// nothing on the host (a cluster).
	ModeNetwork Mode = "network"
)

// Describe says, for the report's header, what the mode means.
func (m Mode) Describe() string {
	if m == ModeNetwork {
		return "network mode: the runtime publishes no host ports; sandboxes and baselines join a network made for the run and are dialled at their address on it"
	}
	return "host mode: sandboxes and baselines publish their port on 127.0.0.1 and are dialled there"
}

// ModeFor chooses a row's mode from what the runtime says of itself
// (runtime.Forms), never from its name: network mode where host ports are
// unsupported, host mode otherwise.
func ModeFor(f runtime.Forms) Mode {
	if f.NoHostPorts {
		return ModeNetwork
	}
	return ModeHost
}

// Unmeasurable says why figures cannot be measured on a runtime that has
// an image store or not (runtime.ImageStore): by part (PartImage,
// PartWarm), the reason, for the report. A part absent from the map can be
// measured.
func Unmeasurable(runtimeName string, imageStore bool) map[string]string {
	out := map[string]string{}
	if !imageStore {
		out[PartImage] = fmt.Sprintf("n/a on %s: it has no image store of its own to ask (no runtime.ImageStore; the node pulls at Run)", runtimeName)
		out[PartWarm] = fmt.Sprintf("n/a on %s: a warm template is an image built, saved and loaded through an image store, which it has not, so warm start is off", runtimeName)
	}
	return out
}
