package runtime

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
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
//   - memory, CPUs and pids are not negative (0: no limit), and CPUs is a
//     number of cores a Linux host can have (ValidateCPUs: not NaN, not
//     infinite, at most MaxCPUs);
//   - every tmpfs path is absolute, and a "size=" among its options is a
//     positive size that fits in an int64 (ParseSize);
//   - every ulimit names a Linux rlimit (UlimitNames; "RLIMIT_NOFILE" and
//     "NOFILE" are made "nofile"), appears once, and its soft limit does
//     not exceed its hard one (-1 is unlimited);
//   - every port has a container port in 1..65535, a host port in 0..65535
//     (0: ephemeral), a protocol tcp or udp (any case; default tcp, made
//     lower-case) and a host IP that is an IPv4 address (default
//     DefaultHostIP: nothing is published on all interfaces unless asked);
//   - every capability is one of PermittedCapabilities (made upper case,
//     without "CAP_", sorted, each once; see confine.go);
//   - no label key is one of ReservedLabelKeys.
//
// Maps and slices the spec shares with the caller are not modified; Ports,
// Ulimits and Capabilities are new slices.
func (s RunSpec) Normalize() (RunSpec, error) {
	if s.Image == "" {
		return s, invalidf("no image given")
	}
	for _, k := range ReservedLabelKeys {
		if _, ok := s.Labels[k]; ok {
			return s, invalidf("label %q is reserved: a backend keeps the container's name in it", k)
		}
	}
	if s.MemoryBytes < 0 || s.PidsLimit < 0 {
		return s, invalidf("negative limit (memory %d, pids %d)", s.MemoryBytes, s.PidsLimit)
	}
	if err := ValidateCPUs(s.CPUs); err != nil {
		return s, err
	}
	for path, opts := range s.Tmpfs {
		if !strings.HasPrefix(path, "/") {
			return s, invalidf("tmpfs path %q is not absolute", path)
		}
		for _, o := range strings.Split(opts, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(o), "size="); ok {
				if _, err := ParseSize(v); err != nil {
					return s, fmt.Errorf("tmpfs %s: %w", path, err)
				}
			}
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

// ReservedLabelKeys are the label keys a run spec may not set, on any
// backend, because one keeps data of its own under them: containerd keeps
// a container's name in "nerdctl/name", as nerdctl does (its container IDs
// are random), so a user's label there would rename the container.
var ReservedLabelKeys = []string{"nerdctl/name"}

// MaxCPUs is the largest CPU quota the port takes, in cores: Linux's
// largest CONFIG_NR_CPUS. More is a mistake (a stray exponent), and far
// more overflows the integer quotas the backends compute from it
// (nanocores, microseconds per period, millicores).
const MaxCPUs = 8192

// ValidateCPUs checks a CPU quota in cores as RunSpec.Normalize does: 0 is
// no limit; NaN, an infinity, a negative number or more than MaxCPUs is an
// error matching ErrInvalid (a NaN or an infinity would pass every
// comparison but the one that refuses it, and become MinInt64 quotas).
func ValidateCPUs(cpus float64) error {
	switch {
	case math.IsNaN(cpus) || math.IsInf(cpus, 0):
		return invalidf("cpus %g: not a number of cores", cpus)
	case cpus < 0:
		return invalidf("negative limit: cpus %g", cpus)
	case cpus > MaxCPUs:
		return invalidf("cpus %g: more than %d cores", cpus, MaxCPUs)
	}
	return nil
}

// ParseSize reads a tmpfs size as mount(8) and Docker write it, in the
// forms every backend takes: bytes, or k, m, g (any case) for KiB, MiB,
// GiB ("16m", "512K", "4096"). A size that is empty, not positive, in
// another form (a percentage, a fraction, "16mb") or too large for an
// int64 is an error matching ErrInvalid.
func ParseSize(v string) (int64, error) {
	mult := int64(1)
	digits := v
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			digits = v[:n-1]
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange), err == nil && n > math.MaxInt64/mult:
		return 0, invalidf("size %q does not fit in 64 bits", v)
	case err != nil || n <= 0 || !isDigits(digits):
		return 0, invalidf("size %q is not a positive size (bytes, or k, m, g)", v)
	}
	return n * mult, nil
}

// isDigits reports whether s is ASCII digits only (ParseInt also takes a
// sign).
func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
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
