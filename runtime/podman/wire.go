package podman

import (
	"encoding/json"
	"time"
)

// The libpod API's wire types, as far as this adapter sends and reads
// them: the fields and JSON names of Podman 4.0 and later (the types of
// go.podman.io/podman/v6's specgen, entities and define packages, which
// this adapter does not import; see the package doc). wire_test.go pins
// each against answers recorded from the service (testdata/).

// specGenerator is the part of libpod's SpecGenerator (the body of POST
// /containers/create) that the adapter sets.
type specGenerator struct {
	Name  string            `json:"name,omitempty"`
	Image string            `json:"image"`
	Env   map[string]string `json:"env,omitempty"`
	// Entrypoint [""] clears the image's (nil keeps it).
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Command    []string          `json:"command,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// HTTPProxy false: the service's proxy variables are not copied
	// into the container (Podman's default is to copy them).
	HTTPProxy  bool `json:"httpproxy"`
	Privileged bool `json:"privileged"`
	// CapDrop ["ALL"] with CapAdd: the container keeps CapAdd and no
	// other capability, in its bounding set too.
	CapAdd  []string `json:"cap_add,omitempty"`
	CapDrop []string `json:"cap_drop,omitempty"`
	// NoNewPrivileges: no setuid binary or file capability raises a
	// process's privileges. The seccomp profile is left to the service:
	// its default one.
	NoNewPrivileges bool                         `json:"no_new_privileges"`
	Mounts          []mountSpec                  `json:"mounts,omitempty"`
	ResourceLimits  *resourceLimits              `json:"resource_limits,omitempty"`
	Rlimits         []rlimitSpec                 `json:"r_limits,omitempty"`
	NetNS           namespace                    `json:"netns"`
	Networks        map[string]perNetworkOptions `json:"Networks,omitempty"`
	PortMappings    []portMapping                `json:"portmappings,omitempty"`
	// Timeout is the container's lifetime in seconds, enforced by
	// conmon (0: none).
	Timeout uint `json:"timeout,omitempty"`
}

// mountSpec is an OCI mount of a SpecGenerator.
type mountSpec struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

// resourceLimits are the OCI Linux resources of a SpecGenerator.
type resourceLimits struct {
	Memory *memoryLimits `json:"memory,omitempty"`
	CPU    *cpuLimits    `json:"cpu,omitempty"`
	Pids   *pidsLimits   `json:"pids,omitempty"`
}

type memoryLimits struct {
	Limit int64 `json:"limit"`
}

type cpuLimits struct {
	Quota  int64  `json:"quota"`
	Period uint64 `json:"period"`
}

type pidsLimits struct {
	Limit int64 `json:"limit"`
}

// rlimitSpec is an OCI POSIX rlimit ("nofile" and the like).
type rlimitSpec struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

// namespace is a SpecGenerator namespace ("bridge" for the network).
type namespace struct {
	NSMode string `json:"nsmode"`
	Value  string `json:"value,omitempty"`
}

// perNetworkOptions are the options of one network to join (none set).
type perNetworkOptions struct{}

// portMapping is a port to publish.
type portMapping struct {
	HostIP        string `json:"host_ip,omitempty"`
	ContainerPort uint16 `json:"container_port"`
	HostPort      uint16 `json:"host_port"`
	Range         uint16 `json:"range"`
	Protocol      string `json:"protocol"`
}

// createResponse is the answer of POST /containers/create.
type createResponse struct {
	ID       string   `json:"Id"`
	Warnings []string `json:"Warnings"`
}

// containerInspect is the part of GET /containers/{name}/json the adapter
// reads.
type containerInspect struct {
	ID        string    `json:"Id"`
	Name      string    `json:"Name"`
	Created   time.Time `json:"Created"`
	ImageName string    `json:"ImageName"`
	State     struct {
		Status    string `json:"Status"`
		Running   bool   `json:"Running"`
		ExitCode  int    `json:"ExitCode"`
		OOMKilled bool   `json:"OOMKilled"`
	} `json:"State"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	HostConfig *hostConfig `json:"HostConfig"`
	Mounts     []struct {
		Type        string `json:"Type"`
		Name        string `json:"Name"`
		Source      string `json:"Source"`
		Destination string `json:"Destination"`
	} `json:"Mounts"`
	NetworkSettings struct {
		IPAddress string `json:"IPAddress"`
		Ports     map[string][]struct {
			HostIP   string `json:"HostIp"`
			HostPort string `json:"HostPort"`
		} `json:"Ports"`
		Networks map[string]struct {
			IPAddress string `json:"IPAddress"`
		} `json:"Networks"`
	} `json:"NetworkSettings"`
}

// hostConfig is the part of an inspect's HostConfig the adapter reads.
type hostConfig struct {
	Memory     int64             `json:"Memory"`
	NanoCPUs   int64             `json:"NanoCpus"`
	CPUQuota   int64             `json:"CpuQuota"`
	CPUPeriod  uint64            `json:"CpuPeriod"`
	PidsLimit  int64             `json:"PidsLimit"`
	Privileged bool              `json:"Privileged"`
	Tmpfs      map[string]string `json:"Tmpfs"`
}

// cpus is the stored CPU limit in cores (0: none).
func (h *hostConfig) cpus() float64 {
	switch {
	case h.NanoCPUs > 0:
		return float64(h.NanoCPUs) / 1e9
	case h.CPUQuota > 0 && h.CPUPeriod > 0:
		return float64(h.CPUQuota) / float64(h.CPUPeriod)
	default:
		return 0
	}
}

// listFilters is the "filters" query of GET /containers/json.
type listFilters struct {
	Label []string `json:"label,omitempty"`
}

// listedContainer is one entry of GET /containers/json.
type listedContainer struct {
	ID       string            `json:"Id"`
	Names    []string          `json:"Names"`
	Image    string            `json:"Image"`
	Labels   map[string]string `json:"Labels"`
	State    string            `json:"State"`
	ExitCode int               `json:"ExitCode"`
	// Created is an RFC 3339 time (Podman 4 and later) or Unix seconds.
	Created  json.RawMessage `json:"Created"`
	Networks []string        `json:"Networks"`
	Ports    []struct {
		HostIP        string `json:"host_ip"`
		ContainerPort int    `json:"container_port"`
		HostPort      int    `json:"host_port"`
		Range         int    `json:"range"`
		Protocol      string `json:"protocol"`
	} `json:"Ports"`
}

// execCreateConfig is the body of POST /containers/{name}/exec (the Docker
// ExecConfig fields that libpod reads).
type execCreateConfig struct {
	AttachStdin  bool     `json:"AttachStdin"`
	AttachStdout bool     `json:"AttachStdout"`
	AttachStderr bool     `json:"AttachStderr"`
	Tty          bool     `json:"Tty"`
	Cmd          []string `json:"Cmd"`
	Env          []string `json:"Env,omitempty"`
	User         string   `json:"User,omitempty"`
}

// idResponse is an answer that carries an ID (POST
// /containers/{name}/exec).
type idResponse struct {
	ID string `json:"Id"`
}

// execStartConfig is the body of POST /exec/{id}/start.
type execStartConfig struct {
	Detach bool `json:"Detach"`
	Tty    bool `json:"Tty"`
}

// execRemoveConfig is the body of POST /exec/{id}/remove.
type execRemoveConfig struct {
	Force bool `json:"Force"`
}

// execSession is the part of GET /exec/{id}/json the adapter reads.
type execSession struct {
	ExitCode int  `json:"ExitCode"`
	Running  bool `json:"Running"`
}

// networkCreate is the body of POST /networks/create (the fields of
// libpod's network type that the adapter sets).
type networkCreate struct {
	Name     string            `json:"name"`
	Driver   string            `json:"driver"`
	Labels   map[string]string `json:"labels,omitempty"`
	Internal bool              `json:"internal"`
	// Options are the driver's options: "isolate".
	Options map[string]string `json:"options,omitempty"`
	Subnets []networkSubnet   `json:"subnets,omitempty"`
}

// networkSubnet is one subnet of a libpod network.
type networkSubnet struct {
	Subnet  string `json:"subnet"`
	Gateway string `json:"gateway,omitempty"`
}

// networkReport is what this adapter reads of a libpod network, as
// POST /networks/create, GET /networks/json and GET /networks/{name}/json
// answer it.
type networkReport struct {
	Name     string            `json:"name"`
	ID       string            `json:"id"`
	Driver   string            `json:"driver"`
	Labels   map[string]string `json:"labels"`
	Internal bool              `json:"internal"`
	Subnets  []networkSubnet   `json:"subnets"`
}

// imageInspect is what this adapter reads of GET /images/{ref}/json.
type imageInspect struct {
	// ID is the config digest's hex, without "sha256:".
	ID string `json:"Id"`
	// Config is the part of the image config a sandbox's layout needs.
	Config struct {
		Env     []string            `json:"Env"`
		Volumes map[string]struct{} `json:"Volumes"`
	} `json:"Config"`
}

// loadReport is the answer of POST /images/load.
type loadReport struct {
	Names []string `json:"Names"`
}

// pullReport is one JSON object of the stream of POST /images/pull.
type pullReport struct {
	Stream string   `json:"stream,omitempty"`
	Error  string   `json:"error,omitempty"`
	Images []string `json:"images,omitempty"`
	ID     string   `json:"id,omitempty"`
}

// infoReport is the part of GET /info the adapter reads.
type infoReport struct {
	Host struct {
		CgroupVersion string `json:"cgroupVersion"`
		// CgroupControllers are the controllers the service's cgroup
		// has (a rootless service's: what was delegated to the user);
		// nil when the service does not say.
		CgroupControllers []string `json:"cgroupControllers"`
		Security          struct {
			Rootless bool `json:"rootless"`
		} `json:"security"`
	} `json:"host"`
	Store struct {
		GraphRoot string `json:"graphRoot"`
	} `json:"store"`
	Version struct {
		APIVersion string `json:"APIVersion"`
		Version    string `json:"Version"`
	} `json:"version"`
}
