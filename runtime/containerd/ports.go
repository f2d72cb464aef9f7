package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/roboco/sandboxer/runtime"
)

// Host ports.
//
// portmap publishes a port with iptables DNAT rules alone: no socket holds
// the host port, so the kernel still thinks it free and hands it out again
// to the next bind(:0) or outgoing connection, and so do Docker's port
// allocator (which draws from the kernel's ephemeral range) and Podman
// (which asks the kernel). A port that the adapter picked the same way
// would then be published twice. So ephemeral host ports come from a range
// of their own, by default above the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), which neither the kernel nor
// Docker nor Podman allocate from; a candidate must be free on the host at
// that moment (a bind test on the host IP, for the port's protocol) and
// reserved by no other container of the adapter. Reservations are files of
// the state dir (ports/<namespace>/<container>.json), written under a file
// lock, so that concurrent runs in different processes never pick the same
// port; Remove deletes them, and one whose container no longer exists is
// dropped at the next pick.

const (
	// EnvHostPortRange overrides, as "first-last", the range ephemeral
	// host ports are picked from (see WithHostPortRange).
	EnvHostPortRange = "SANDBOXER_CONTAINERD_HOST_PORTS"

	// kernelPortRangeFile is the kernel's ephemeral port range.
	kernelPortRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"
	// belowKernelRange is how many ports below the kernel's ephemeral
	// range the default range takes when there is no room above it.
	belowKernelRange = 4096
)

// fallbackHostPortRange is the default range when the kernel's cannot be
// read: what lies above Linux's default ephemeral range, 32768-60999.
var fallbackHostPortRange = portRange{First: 61000, Last: 65535}

// portRange is an inclusive range of ports.
type portRange struct {
	First, Last int
}

func (p portRange) String() string { return fmt.Sprintf("%d-%d", p.First, p.Last) }

// size is the number of ports in the range.
func (p portRange) size() int { return p.Last - p.First + 1 }

// valid says whether the range is a non-empty range of usable ports.
func (p portRange) valid() error {
	if p.First < 1 || p.Last > 65535 || p.First > p.Last {
		return fmt.Errorf("host port range %d-%d: want 1 <= first <= last <= 65535", p.First, p.Last)
	}
	return nil
}

// parsePortRange reads "first-last" (the format of ip_local_port_range,
// with a dash or blanks between the two).
func parsePortRange(s string) (portRange, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == ' ' || r == '\t' || r == '\n' })
	if len(fields) != 2 {
		return portRange{}, fmt.Errorf("port range %q: want first-last", strings.TrimSpace(s))
	}
	first, err1 := strconv.Atoi(fields[0])
	last, err2 := strconv.Atoi(fields[1])
	if err := errors.Join(err1, err2); err != nil {
		return portRange{}, fmt.Errorf("port range %q: %w", strings.TrimSpace(s), err)
	}
	p := portRange{First: first, Last: last}
	return p, p.valid()
}

// defaultHostPortRange is the range above the kernel's ephemeral range,
// given as ip_local_port_range reads; when the kernel's range reaches
// 65535, the belowKernelRange ports below it (not under 1024).
func defaultHostPortRange(kernel string) (portRange, error) {
	k, err := parsePortRange(kernel)
	if err != nil {
		return portRange{}, fmt.Errorf("%s: %w", kernelPortRangeFile, err)
	}
	if k.Last < 65535 {
		return portRange{First: k.Last + 1, Last: 65535}, nil
	}
	if k.First > 1024 {
		return portRange{First: max(1024, k.First-belowKernelRange), Last: k.First - 1}, nil
	}
	return portRange{}, fmt.Errorf("the kernel's ephemeral port range %s leaves no ports for the adapter: set one with WithHostPortRange or %s", k, EnvHostPortRange)
}

// hostPortRange resolves the range: the option's, else the environment's,
// else the default from the kernel's range.
func hostPortRange(opt *portRange) (portRange, error) {
	if opt != nil {
		return *opt, opt.valid()
	}
	if s := strings.TrimSpace(os.Getenv(EnvHostPortRange)); s != "" {
		p, err := parsePortRange(s)
		if err != nil {
			return portRange{}, fmt.Errorf("%s: %w", EnvHostPortRange, err)
		}
		return p, nil
	}
	b, err := os.ReadFile(kernelPortRangeFile)
	if err != nil {
		return fallbackHostPortRange, nil
	}
	return defaultHostPortRange(string(b))
}

// portKey is a host port of a protocol, whatever its host IP: a port
// published on one address is not handed out again on another.
type portKey struct {
	proto string
	port  int
}

// reservation is the file that holds a container's published host ports.
type reservation struct {
	Namespace string                `json:"namespace"`
	Container string                `json:"container"`
	Ports     []runtime.PortBinding `json:"ports"`
}

func (r *Runtime) portsDir() string { return filepath.Join(r.stateDir, "ports") }

func (r *Runtime) reservationFile(namespace, id string) string {
	return filepath.Join(r.portsDir(), namespace, id+".json")
}

// bindPorts fills in the host port of each port asked without one, from
// the host port range, and reserves the container's host ports (explicit
// ones too, so that no pick hands them out), all under the ports lock.
// Ports come with their defaults (tcp, 127.0.0.1) filled in.
func (r *Runtime) bindPorts(ctx context.Context, id string, ports []runtime.PortSpec) ([]runtime.PortBinding, error) {
	out := make([]runtime.PortBinding, 0, len(ports))
	if len(ports) == 0 {
		return out, nil
	}
	unlock, err := lockFile(r.portsDir())
	if err != nil {
		return nil, fmt.Errorf("lock the host port reservations: %w", err)
	}
	defer unlock()
	taken, err := r.portsInUse(ctx)
	if err != nil {
		return nil, fmt.Errorf("host ports in use: %w", err)
	}
	for _, p := range ports {
		b := runtime.PortBinding(p)
		if b.HostPort == 0 {
			port, err := pickPort(r.portRange, taken, b.Protocol, b.HostIP)
			if err != nil {
				return nil, fmt.Errorf("pick a host port for %d/%s: %w", b.ContainerPort, b.Protocol, err)
			}
			b.HostPort = port
		}
		taken[portKey{b.Protocol, b.HostPort}] = true
		out = append(out, b)
	}
	if err := r.reserve(id, out); err != nil {
		return nil, fmt.Errorf("reserve host ports: %w", err)
	}
	return out, nil
}

// pickPort returns a port of the range that is not taken and that can be
// bound on ip for proto right now, trying them in order from a random one
// (so that pickers that do not share reservations, such as adapters with
// other state dirs, seldom try the same ports).
func pickPort(pr portRange, taken map[portKey]bool, proto, ip string) (int, error) {
	n := pr.size()
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		port := pr.First + (start+i)%n
		if taken[portKey{proto, port}] || !bindable(proto, ip, port) {
			continue
		}
		return port, nil
	}
	return 0, fmt.Errorf("no free %s port on %s in the host port range %s", proto, ip, pr)
}

// bindable says whether a socket of proto can bind ip:port now, which a
// listener or a connected socket on the port prevents (Docker's and
// Podman's published ports hold one).
func bindable(proto, ip string, port int) bool {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	if proto == "udp" {
		c, err := net.ListenPacket("udp4", addr)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// portsInUse gathers, under the ports lock, the host ports that the
// adapter's containers hold: those of every live reservation (a
// reservation whose container is gone is deleted) and those recorded as
// published by the containers of the namespaces involved (which covers
// containers run before reservations existed).
func (r *Runtime) portsInUse(ctx context.Context) (map[portKey]bool, error) {
	taken := map[portKey]bool{}
	res, err := r.readReservations()
	if err != nil {
		return nil, err
	}
	nsList := []string{r.namespace}
	for ns := range res {
		if ns != r.namespace {
			nsList = append(nsList, ns)
		}
	}
	for _, ns := range nsList {
		infos, err := r.client.ContainerService().List(namespaces.WithNamespace(ctx, ns))
		if err != nil {
			return nil, fmt.Errorf("list the containers of namespace %s: %w", ns, err)
		}
		live := make(map[string]bool, len(infos))
		for _, info := range infos {
			live[info.ID] = true
			rec, err := recordOf(info)
			if err != nil {
				continue // not the adapter's to vouch for
			}
			for _, p := range rec.Published {
				taken[portKey{p.Protocol, p.HostPort}] = true
			}
		}
		for id, rv := range res[ns] {
			if !live[id] {
				// Removed behind the adapter's back (or half-way):
				// its ports are free again.
				if err := os.Remove(r.reservationFile(ns, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, err
				}
				continue
			}
			for _, p := range rv.Ports {
				taken[portKey{p.Protocol, p.HostPort}] = true
			}
		}
	}
	return taken, nil
}

// readReservations reads every reservation, by namespace and container.
func (r *Runtime) readReservations() (map[string]map[string]*reservation, error) {
	out := map[string]map[string]*reservation{}
	nsDirs, err := os.ReadDir(r.portsDir())
	if err != nil {
		return nil, err
	}
	for _, d := range nsDirs {
		if !d.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(r.portsDir(), d.Name()))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			id, ok := strings.CutSuffix(f.Name(), ".json")
			if !ok || f.IsDir() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(r.portsDir(), d.Name(), f.Name()))
			if errors.Is(err, fs.ErrNotExist) {
				continue // released meanwhile
			}
			if err != nil {
				return nil, err
			}
			var rv reservation
			if err := json.Unmarshal(b, &rv); err != nil {
				return nil, fmt.Errorf("host port reservation %s: %w", f.Name(), err)
			}
			if out[d.Name()] == nil {
				out[d.Name()] = map[string]*reservation{}
			}
			out[d.Name()][id] = &rv
		}
	}
	return out, nil
}

// reserve writes the container's reservation (atomically: a reader sees
// the old file or the new one). The caller holds the ports lock.
func (r *Runtime) reserve(id string, ports []runtime.PortBinding) error {
	b, err := json.Marshal(reservation{Namespace: r.namespace, Container: id, Ports: ports})
	if err != nil {
		return err
	}
	file := r.reservationFile(r.namespace, id)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// release deletes the container's reservation, if any.
func (r *Runtime) release(id string) error {
	if err := os.Remove(r.reservationFile(r.namespace, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
