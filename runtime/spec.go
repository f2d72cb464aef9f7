package runtime

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// Normalize checks the rules of the port that every backend applies to a
// run spec, and returns the spec with the port's defaults filled in, so
// that the same spec gets the same answer on every adapter. Adapters call
// it first in Run and Create, and work on what it returns; the backend
// then only refuses what is its own business (a name it cannot take, a
// limit it cannot enforce).
//
// The rules, each failure matching ErrInvalid:
//   - an image is given;
//   - memory, CPUs and pids are not negative (0: no limit);
//   - every tmpfs path is absolute;
//   - every ulimit names a Linux rlimit (UlimitNames; "RLIMIT_NOFILE" and
//     "NOFILE" are made "nofile"), appears once, and its soft limit does
//     not exceed its hard one (-1 is unlimited);
//   - every port has a container port in 1..65535, a host port in 0..65535
//     (0: ephemeral), a protocol tcp or udp (any case; default tcp, made
//     lower-case) and a host IP that is an IPv4 address (default
//     DefaultHostIP: nothing is published on all interfaces unless asked);
//   - every capability is one of PermittedCapabilities (made upper case,
//     without "CAP_", sorted, each once; see confine.go).
//
// Maps and slices the spec shares with the caller are not modified; Ports,
// Ulimits and Capabilities are new slices.
func (s RunSpec) Normalize() (RunSpec, error) {
	if s.Image == "" {
		return s, invalidf("no image given")
	}
	if s.MemoryBytes < 0 || s.CPUs < 0 || s.PidsLimit < 0 {
		return s, invalidf("negative limit (memory %d, cpus %g, pids %d)", s.MemoryBytes, s.CPUs, s.PidsLimit)
	}
	for path := range s.Tmpfs {
		if !strings.HasPrefix(path, "/") {
			return s, invalidf("tmpfs path %q is not absolute", path)
		}
	}
	if s.Ulimits != nil {
		seen := make(map[string]bool, len(s.Ulimits))
		ulimits := make([]Ulimit, len(s.Ulimits))
		for i, u := range s.Ulimits {
			nu, err := u.normalize(seen)
			if err != nil {
				return s, err
			}
			ulimits[i] = nu
		}
		s.Ulimits = ulimits
	}
	caps, err := normalizeCapabilities(s.Capabilities)
	if err != nil {
		return s, err
	}
	s.Capabilities = caps
	if s.Ports != nil {
		ports := make([]PortSpec, len(s.Ports))
		for i, p := range s.Ports {
			np, err := p.Normalize()
			if err != nil {
				return s, err
			}
			ports[i] = np
		}
		s.Ports = ports
	}
	return s, nil
}

// UlimitNames are the rlimits a Ulimit may name, as ulimit(1) and Docker
// spell them.
var UlimitNames = []string{
	"as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice",
	"nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack",
}

// normalize checks u and returns it under its short name; seen collects
// the names so far.
func (u Ulimit) normalize(seen map[string]bool) (Ulimit, error) {
	u.Name = strings.ToLower(strings.TrimPrefix(strings.ToUpper(u.Name), "RLIMIT_"))
	switch {
	case u.Name == "":
		return u, invalidf("ulimit without a name")
	case !slices.Contains(UlimitNames, u.Name):
		return u, invalidf("unknown ulimit %q", u.Name)
	case seen[u.Name]:
		return u, invalidf("ulimit %q given twice", u.Name)
	case u.Soft < -1 || u.Hard < -1:
		return u, invalidf("ulimit %s: negative limit %d:%d", u.Name, u.Soft, u.Hard)
	case u.Hard != -1 && (u.Soft == -1 || u.Soft > u.Hard):
		return u, invalidf("ulimit %s: soft limit %d above hard limit %d", u.Name, u.Soft, u.Hard)
	}
	seen[u.Name] = true
	return u, nil
}

// Normalize checks a port the way RunSpec.Normalize does and returns it
// with its defaults: protocol "tcp", host IP DefaultHostIP.
func (p PortSpec) Normalize() (PortSpec, error) {
	p.Protocol = strings.ToLower(p.Protocol)
	if p.Protocol == "" {
		p.Protocol = "tcp"
	}
	if p.HostIP == "" {
		p.HostIP = DefaultHostIP
	}
	switch ip := net.ParseIP(p.HostIP); {
	case p.Protocol != "tcp" && p.Protocol != "udp":
		return p, invalidf("port %d: protocol %q is neither tcp nor udp", p.ContainerPort, p.Protocol)
	case p.ContainerPort < 1 || p.ContainerPort > 65535:
		return p, invalidf("container port %d out of range", p.ContainerPort)
	case p.HostPort < 0 || p.HostPort > 65535:
		return p, invalidf("host port %d of port %d out of range", p.HostPort, p.ContainerPort)
	case ip == nil || ip.To4() == nil:
		return p, invalidf("host IP %q of port %d is not an IPv4 address", p.HostIP, p.ContainerPort)
	}
	return p, nil
}

// invalidf is an ErrInvalid error with a message.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
