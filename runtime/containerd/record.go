package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/typeurl/v2"

	"github.com/roboco/sandboxer/runtime"
)

// extensionName is the key of the adapter's record among a container's
// extensions.
const extensionName = "sandboxer"

// record is what the adapter keeps about a container, as a container
// extension in containerd's metadata, so that any process (another CLI run,
// the janitor) can inspect, stop and remove what this one created: the
// image ref as given, the network configuration the container joined with,
// what that gave it, and what Remove must delete.
type record struct {
	// Image is the ref as the run spec gave it (containerd stores the
	// normalised name).
	Image string `json:"image"`
	// StopSignal is the image's stop signal ("" for SIGTERM).
	StopSignal string `json:"stopSignal,omitempty"`
	// Network is the network the container joins when its task starts.
	Network string `json:"network,omitempty"`
	// Ports are the ports to publish, as asked.
	Ports []runtime.PortSpec `json:"ports,omitempty"`
	// Tmpfs are the tmpfs mount points.
	Tmpfs []string `json:"tmpfs,omitempty"`
	// Volumes are the anonymous volumes made for the image's VOLUMEs.
	Volumes []volume `json:"volumes,omitempty"`
	// Log is the file the task's stdout and stderr go to.
	Log string `json:"log,omitempty"`
	// EmptyLabels are the keys of the run spec's labels whose value is
	// empty: containerd drops such labels, so they are kept here.
	EmptyLabels []string `json:"emptyLabels,omitempty"`

	// Set once the container joined its network (task started):

	// Attached is the CNI network configuration list the container was
	// added to; Remove deletes it from exactly that, even if the network
	// definition is gone by then.
	Attached json.RawMessage `json:"attached,omitempty"`
	// Addresses maps the network name to the container's IPv4 address.
	Addresses map[string]string `json:"addresses,omitempty"`
	// Published are the ports as bound on the host.
	Published []runtime.PortBinding `json:"published,omitempty"`
}

func init() {
	typeurl.Register(&record{}, "github.com/roboco/sandboxer/runtime/containerd", "record")
}

// withRecord stores rec on the container being created or updated.
func withRecord(rec *record) func(context.Context, *client.Client, *containers.Container) error {
	return func(_ context.Context, _ *client.Client, c *containers.Container) error {
		ext, err := typeurl.MarshalAny(rec)
		if err != nil {
			return fmt.Errorf("encode the adapter's record: %w", err)
		}
		if c.Extensions == nil {
			c.Extensions = map[string]typeurl.Any{}
		}
		c.Extensions[extensionName] = ext
		return nil
	}
}

// recordOf reads the adapter's record of c; a container that the adapter
// did not create has an empty one.
func recordOf(c containers.Container) (*record, error) {
	ext, ok := c.Extensions[extensionName]
	if !ok || ext == nil {
		return &record{Image: c.Image}, nil
	}
	v, err := typeurl.UnmarshalAny(ext)
	if err != nil {
		return nil, fmt.Errorf("decode the adapter's record of %s: %w", c.ID, err)
	}
	rec, ok := v.(*record)
	if !ok {
		return nil, fmt.Errorf("the adapter's record of %s is a %T", c.ID, v)
	}
	return rec, nil
}

// userLabels are the run spec's labels, exactly: the container's labels
// without those containerd reserves for itself (garbage collection
// references) and the name label (the adapter's, reported as the
// container's Name; RunSpec.Normalize refuses it as a label), plus the
// empty-valued ones the record keeps.
func userLabels(labels map[string]string, rec *record) map[string]string {
	out := make(map[string]string, len(labels)+len(rec.EmptyLabels))
	for k, v := range labels {
		if strings.HasPrefix(k, "containerd.io/") || k == NerdctlNameLabel {
			continue
		}
		out[k] = v
	}
	for _, k := range rec.EmptyLabels {
		out[k] = ""
	}
	return out
}

// emptyLabelKeys lists, in order, the keys of labels whose value is empty.
func emptyLabelKeys(labels map[string]string) []string {
	var keys []string
	for k, v := range labels {
		if v == "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
