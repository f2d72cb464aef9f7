package containerd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	cni "github.com/containerd/go-cni"
	"github.com/vishvananda/netlink"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

const (
	// DefaultNetwork is the network a container joins when its run spec
	// names none. The adapter creates it on first use.
	DefaultNetwork = "sandboxer"
	// BridgePrefix starts the name of every bridge the adapter creates, so
	// that clean-ups can tell them from anyone else's.
	BridgePrefix = "sbx-"
	// ifPrefix names the container's interfaces: eth0 for its network.
	ifPrefix = "eth"
)

// validNetworkName is what Docker accepts, and safe as a file name.
var validNetworkName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)

// networkDef is a network as the adapter persists it in its state dir, so
// that every process (and adapter instance) sees the same networks.
type networkDef struct {
	Name    string            `json:"name"`
	ID      string            `json:"id"`
	Bridge  string            `json:"bridge"`
	Subnet  string            `json:"subnet"`
	Gateway string            `json:"gateway"`
	Labels  map[string]string `json:"labels,omitempty"`
	Created time.Time         `json:"created"`
	// Internal is NetworkSpec.Internal: no route out of the bridge (see
	// isolationRules), no published ports.
	Internal bool `json:"internal,omitempty"`
}

func (r *Runtime) networksDir() string { return filepath.Join(r.stateDir, "networks") }
func (r *Runtime) ipamDir() string     { return filepath.Join(r.stateDir, "ipam") }

func (r *Runtime) networkFile(name string) string {
	return filepath.Join(r.networksDir(), name+".json")
}

// lockNetworks serialises changes to the network definitions across
// processes.
func (r *Runtime) lockNetworks() (func(), error) { return lockFile(r.networksDir()) }

// lockFile takes an exclusive flock on the file .lock of dir (made if
// need be), which serialises a change to dir's contents across processes
// (and across the open files of one process), and returns its release.
func lockFile(dir string) (func(), error) { return lockDir(context.Background(), dir, true) }

// errLocked is lockDir's answer, when told not to wait, to a lock that
// someone holds.
var errLocked = errors.New("locked by another process")

// lockRetry is how often lockDir tries again a lock that is held, while
// ctx has a deadline (flock(2) itself cannot be given one).
const lockRetry = 10 * time.Millisecond

// lockDir is lockFile; unless wait, a lock that is held is errLocked at
// once; if ctx can end, the wait ends with it (an error wrapping ctx's).
func lockDir(ctx context.Context, dir string, wait bool) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	unlock := func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
	how := syscall.LOCK_EX
	if !wait || ctx.Done() != nil {
		how |= syscall.LOCK_NB
	}
	err = syscall.Flock(int(f.Fd()), how)
	if errors.Is(err, syscall.EWOULDBLOCK) && wait {
		if testHookLockWait != nil {
			testHookLockWait(dir)
		}
		tick := time.NewTicker(lockRetry)
		defer tick.Stop()
		for errors.Is(err, syscall.EWOULDBLOCK) {
			select {
			case <-ctx.Done():
				f.Close()
				return nil, fmt.Errorf("wait for the lock of %s: %w", dir, ctx.Err())
			case <-tick.C:
			}
			err = syscall.Flock(int(f.Fd()), how)
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, err
	}
	return unlock, nil
}

// testHookLockWait, when set (by tests only), runs when lockDir finds the
// lock of dir held and starts to wait for it.
var testHookLockWait func(dir string)

// CreateNetwork creates a bridge network with a /26 of its own from
// sandboxer's subnet pool (adapterkit.SubnetPool: SANDBOXER_SUBNET_POOL)
// and a bridge named sbx-<hash of the name>, and installs the adapter's
// isolation rules for that bridge (see isolationRules). The definition is
// a file of the state dir; the bridge itself appears when the first
// container joins. A name that is taken is ErrAlreadyExists.
func (r *Runtime) CreateNetwork(ctx context.Context, spec runtime.NetworkSpec) (runtime.Network, error) {
	const op = runtime.OpCreateNetwork
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, spec.Name); err != nil {
		return runtime.Network{}, err
	}
	def, err := r.createNetwork(ctx, spec)
	if err != nil {
		return runtime.Network{}, r.wrap(op, spec.Name, err)
	}
	return def.network(), nil
}

// network is the definition in the port's terms.
func (def *networkDef) network() runtime.Network {
	n := runtime.Network{ID: def.ID, Name: def.Name, Internal: def.Internal, Labels: map[string]string{}}
	for k, v := range def.Labels {
		n.Labels[k] = v
	}
	if p, err := netip.ParsePrefix(def.Subnet); err == nil {
		n.Subnet = p
	}
	return n
}

func (r *Runtime) createNetwork(ctx context.Context, spec runtime.NetworkSpec) (*networkDef, error) {
	if !validNetworkName.MatchString(spec.Name) {
		return nil, fmt.Errorf("invalid network name %q (want %s): %w", spec.Name, validNetworkName, runtime.ErrInvalid)
	}
	pool, err := adapterkit.SubnetPool(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", runtime.ErrInvalid, err)
	}
	unlock, err := r.lockNetworks()
	if err != nil {
		return nil, fmt.Errorf("lock the network definitions: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(r.networkFile(spec.Name)); err == nil {
		return nil, r.wrap(runtime.OpCreateNetwork, spec.Name, adapterkit.WithKind(runtime.ErrAlreadyExists, "network %q exists", spec.Name))
	}
	defs, err := r.readNetworks()
	if err != nil {
		return nil, err
	}
	subnet, err := adapterkit.FreeSubnet(pool, spec.Name, takenSubnets(defs))
	if err != nil {
		return nil, err
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	def := &networkDef{
		Name:     spec.Name,
		ID:       hex.EncodeToString(id),
		Bridge:   bridgeName(spec.Name),
		Subnet:   subnet.String(),
		Gateway:  adapterkit.Gateway(subnet).String(),
		Labels:   spec.Labels,
		Created:  time.Now().UTC(),
		Internal: spec.Internal,
	}
	// The rules first: a definition on disk always has its rules (or a
	// removal that failed half-way, which RemoveNetwork finishes).
	if err := r.isolate(ctx, def); err != nil {
		_ = r.unisolate(ctx, def)
		return nil, fmt.Errorf("isolate the network's bridge: %w", err)
	}
	// The bridge with its gateway address now, not at the first join:
	// its route tells the other adapters (and anyone reading the host's
	// routes) that the subnet is taken.
	if err := ensureBridge(def); err != nil {
		_ = deleteLink(def.Bridge)
		_ = r.unisolate(ctx, def)
		return nil, fmt.Errorf("create bridge %s: %w", def.Bridge, err)
	}
	b, err := json.MarshalIndent(def, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp := r.networkFile(spec.Name) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, r.networkFile(spec.Name)); err != nil {
		return nil, err
	}
	return def, nil
}

// takenSubnets are the subnets a new network must not overlap: the
// adapter's other networks', and every destination of the host's IPv4
// routes and address of its interfaces (another runtime's bridges, the
// host's own networks).
func takenSubnets(defs []*networkDef) []netip.Prefix {
	var taken []netip.Prefix
	for _, d := range defs {
		if p, err := netip.ParsePrefix(d.Subnet); err == nil {
			taken = append(taken, p)
		}
	}
	if routes, err := netlink.RouteList(nil, netlink.FAMILY_V4); err == nil {
		for _, rt := range routes {
			if rt.Dst == nil {
				continue // the default route
			}
			if p, ok := prefixOf(rt.Dst); ok && p.Bits() > 0 {
				taken = append(taken, p)
			}
		}
	}
	for _, a := range hostAddresses() {
		if addr, ok := netip.AddrFromSlice(a); ok {
			taken = append(taken, netip.PrefixFrom(addr.Unmap(), 32))
		}
	}
	return taken
}

// prefixOf converts a net.IPNet.
func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(addr.Unmap(), ones).Masked(), true
}

// bridgeName is sbx- and 8 hex digits of the network name's hash: unique
// per name, and within the 15 bytes of an interface name.
func bridgeName(network string) string {
	sum := sha256.Sum256([]byte(network))
	return BridgePrefix + hex.EncodeToString(sum[:4])
}

// readNetworks reads every network definition.
func (r *Runtime) readNetworks() ([]*networkDef, error) {
	entries, err := os.ReadDir(r.networksDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var defs []*networkDef
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		def, err := r.readNetwork(name)
		if err != nil {
			return nil, err
		}
		if def != nil {
			defs = append(defs, def)
		}
	}
	return defs, nil
}

// readNetwork reads one definition; nil when there is none.
func (r *Runtime) readNetwork(name string) (*networkDef, error) {
	b, err := os.ReadFile(r.networkFile(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var def networkDef
	if err := json.Unmarshal(b, &def); err != nil {
		return nil, fmt.Errorf("network definition %s: %w", r.networkFile(name), err)
	}
	return &def, nil
}

// hostAddresses lists the IPv4 addresses of the host's interfaces.
func hostAddresses() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			ips = append(ips, n.IP.To4())
		}
	}
	return ips
}

// RemoveNetwork deletes a network's isolation rules, IP allocations,
// bridge and definition. A network that a container still uses (one of
// this namespace's containers names it, or an interface is on its bridge)
// is refused with ErrInUse and left as it was; an absent network is not an
// error.
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	const op = runtime.OpRemoveNetwork
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, name); err != nil {
		return err
	}
	if !validNetworkName.MatchString(name) {
		return nil // no such network can exist
	}
	unlock, err := r.lockNetworks()
	if err != nil {
		return r.wrap(op, name, fmt.Errorf("lock the network definitions: %w", err))
	}
	defer unlock()
	def, err := r.readNetwork(name)
	if err != nil {
		return r.wrap(op, name, err)
	}
	if def == nil {
		return nil
	}
	if ports := bridgePorts(def.Bridge); len(ports) > 0 {
		return r.wrap(op, name, adapterkit.WithKind(runtime.ErrInUse, "network %s is in use: %d interface(s) on bridge %s", name, len(ports), def.Bridge))
	}
	users, err := r.networkUsers(ctx, name)
	if err != nil {
		return r.wrap(op, name, err)
	}
	if len(users) > 0 {
		return r.wrap(op, name, adapterkit.WithKind(runtime.ErrInUse, "network %s is in use by container(s) %s", name, strings.Join(users, ", ")))
	}
	if err := deleteLink(def.Bridge); err != nil {
		return r.wrap(op, name, fmt.Errorf("delete bridge %s: %w", def.Bridge, err))
	}
	if err := r.unisolate(ctx, def); err != nil {
		return r.wrap(op, name, fmt.Errorf("delete the isolation rules: %w", err))
	}
	if err := os.RemoveAll(filepath.Join(r.ipamDir(), name)); err != nil {
		return r.wrap(op, name, err)
	}
	if err := os.Remove(r.networkFile(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r.wrap(op, name, err)
	}
	return nil
}

// networkUsers lists the containers of the adapter's namespace, in any
// state, whose record names the network, and those holding a network
// lease on it (an attach under way).
func (r *Runtime) networkUsers(ctx context.Context, name string) ([]string, error) {
	cs, err := r.client.ContainerService().List(ctx)
	if err != nil {
		return nil, err
	}
	var users []string
	for _, c := range cs {
		rec, err := recordOf(c)
		if err != nil {
			continue // not the adapter's
		}
		if rec.Network == name {
			users = append(users, c.ID)
		}
	}
	ids, err := r.leasedContainers(r.namespace)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		l, err := r.readLease(r.namespace, id)
		if err == nil && l != nil && l.Network == name && !slices.Contains(users, id) {
			users = append(users, id)
		}
	}
	return users, nil
}

// ensureBridge creates the network's bridge, up, with the gateway address
// on its subnet (as the CNI bridge plugin, isGateway, would make it at the
// first join, and then finds it so).
func ensureBridge(def *networkDef) error {
	subnet, err := netip.ParsePrefix(def.Subnet)
	if err != nil {
		return err
	}
	gw, err := netip.ParseAddr(def.Gateway)
	if err != nil {
		return err
	}
	link, err := netlink.LinkByName(def.Bridge)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return err
		}
		attrs := netlink.NewLinkAttrs()
		attrs.Name = def.Bridge
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil && !errors.Is(err, syscall.EEXIST) {
			return err
		}
		if link, err = netlink.LinkByName(def.Bridge); err != nil {
			return err
		}
	}
	if _, ok := link.(*netlink.Bridge); !ok {
		return fmt.Errorf("%s exists and is a %s, not a bridge", def.Bridge, link.Type())
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: gw.AsSlice(), Mask: net.CIDRMask(subnet.Bits(), 32)}}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return err
	}
	return netlink.LinkSetUp(link)
}

// bridgePorts lists the interfaces enslaved to a bridge.
func bridgePorts(bridge string) []string {
	entries, err := os.ReadDir(filepath.Join("/sys/class/net", bridge, "brif"))
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// deleteLink deletes a network interface; an absent one is fine.
func deleteLink(name string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return err
	}
	return netlink.LinkDel(link)
}

// network returns the definition of the network a container joins,
// creating the default network on first use.
func (r *Runtime) network(op, object, name string) (*networkDef, error) {
	def, err := r.readNetwork(name)
	if err != nil {
		return nil, r.wrap(op, object, err)
	}
	if def != nil {
		return def, nil
	}
	if name != DefaultNetwork {
		return nil, r.wrap(op, object, adapterkit.WithKind(runtime.ErrNotFound, "network %q not found", name))
	}
	def, err = r.createNetwork(context.Background(), runtime.NetworkSpec{Name: name})
	if errors.Is(err, runtime.ErrAlreadyExists) {
		// Another process created it meanwhile.
		def, err = r.readNetwork(name)
	}
	if err != nil {
		return nil, r.wrap(op, object, fmt.Errorf("create the default network: %w", err))
	}
	return def, nil
}

// conflist is a network's CNI configuration: a bridge with host-local IPAM
// (allocations in the adapter's state dir), portmap for published ports
// (only when there are some: its iptables work costs tens of milliseconds
// at each start and removal), and firewall, which lets the bridge's
// traffic through a FORWARD chain whose policy is DROP (as Docker sets it,
// with br_netfilter on).
func (r *Runtime) conflist(def *networkDef, publish bool) ([]byte, error) {
	plugins := []map[string]any{
		{
			"type":        "bridge",
			"bridge":      def.Bridge,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": r.ipamDir(),
				"ranges":  [][]map[string]string{{{"subnet": def.Subnet, "gateway": def.Gateway}}},
			},
		},
	}
	if publish {
		plugins = append(plugins, map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}})
	}
	plugins = append(plugins, map[string]any{"type": "firewall", "backend": "iptables"})
	return json.Marshal(map[string]any{
		"cniVersion": "1.0.0",
		"name":       def.Name,
		"plugins":    plugins,
	})
}

// cniFor loads a CNI instance for one network configuration list, which
// becomes eth0, and the loopback network. (go-cni names interfaces in load
// order, so the list must come first.)
func (r *Runtime) cniFor(conflist []byte) (cni.CNI, error) {
	c, err := cni.New(cni.WithPluginDir(r.cniDirs), cni.WithInterfacePrefix(ifPrefix))
	if err != nil {
		return nil, err
	}
	if err := c.Load(cni.WithConfListBytes(conflist), cni.WithLoNetwork); err != nil {
		return nil, err
	}
	return c, nil
}

// attachment is what joining a network gave a container.
type attachment struct {
	conflist  []byte
	address   string
	published []runtime.PortBinding
}

// attach adds the network namespace of process pid to the network (CNI
// ADD) with the port mappings asked for, ephemeral host ports being chosen
// (and every host port reserved) by bindPorts, since portmap has none of
// its own. A lease (see networkLease) is written before the ADD; the
// caller drops it once the attachment is recorded. An ADD that fails
// part-way (a plugin of the list failed after the bridge plugin made the
// veth and took an address), or that outlives the caller's context, is
// undone (CNI DEL) before attach returns.
func (r *Runtime) attach(ctx context.Context, id string, pid uint32, def *networkDef, ports []runtime.PortSpec) (*attachment, error) {
	if err := r.ensureIsolated(ctx, def); err != nil {
		return nil, fmt.Errorf("isolate network %s: %w", def.Name, err)
	}
	conflist, err := r.conflist(def, len(ports) > 0)
	if err != nil {
		return nil, err
	}
	c, err := r.cniFor(conflist)
	if err != nil {
		return nil, fmt.Errorf("load network %s: %w", def.Name, err)
	}
	published, err := r.bindPorts(ctx, id, ports)
	if err != nil {
		return nil, err
	}
	lease := networkLease{
		Namespace: r.namespace,
		Container: id,
		Network:   def.Name,
		Pid:       pid,
		Conflist:  conflist,
		Published: published,
		Created:   time.Now().UTC(),
	}
	if err := r.takeLease(ctx, lease); err != nil {
		return nil, fmt.Errorf("join network %s: %w", def.Name, err)
	}
	netns := netnsPath(pid)
	var res *cni.Result
	for attempt := 1; ; attempt++ {
		// Not under ctx: see cniTimeout. Whether the caller gave up
		// meanwhile is checked once the plugins are done.
		addCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cniTimeout)
		res, err = c.Setup(addCtx, id, netns, cni.WithCapabilityPortMap(portMappings(published)))
		cancel()
		if err == nil {
			err = ctx.Err()
		}
		if err == nil || ctx.Err() != nil || attempt == maxAddAttempts || !lostChainRace(err) {
			break
		}
		// Undone first, so that the next ADD starts from nothing (the
		// bridge plugin's address and veth, portmap's rules).
		r.log.Debug("containerd: CNI ADD lost an iptables chain race, trying again", "container", id, "network", def.Name, "attempt", attempt, "error", err)
		r.undoAttach(ctx, id, netns, &lease)
		if werr := r.writeLease(lease); werr != nil {
			return nil, fmt.Errorf("join network %s: write the network lease: %w", def.Name, werr)
		}
	}
	a := &attachment{conflist: conflist, published: published}
	if err == nil {
		if iface, ok := res.Interfaces[ifPrefix+"0"]; ok {
			for _, ipc := range iface.IPConfigs {
				if ip4 := ipc.IP.To4(); ip4 != nil {
					a.address = ip4.String()
					break
				}
			}
		}
		if a.address == "" {
			err = errors.New("no IPv4 address in the CNI result")
		}
	}
	if err != nil {
		r.undoAttach(ctx, id, netns, &lease)
		return nil, fmt.Errorf("join network %s: %w", def.Name, err)
	}
	return a, nil
}

// maxAddAttempts bounds the CNI ADDs of one attach (see lostChainRace).
const maxAddAttempts = 3

// lostChainRace reports whether a CNI ADD failed because a plugin lost a
// race with a concurrent ADD to create an iptables chain: the firewall
// and portmap plugins (v1.1) create their chains (CNI-FORWARD,
// CNI-HOSTPORT-DNAT ...) with `iptables -N`, which fails with "File
// exists" (nf_tables: "CHAIN_USER_ADD failed (File exists)"; legacy:
// "Chain already exists") for all but one of the ADDs that find the chain
// missing at once. The chain exists afterwards, so the same ADD succeeds
// when tried again. Plugins report errors as text only.
func lostChainRace(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "iptables") &&
		(strings.Contains(msg, "File exists") || strings.Contains(msg, "Chain already exists"))
}

// undoAttach deletes a container from the network of its lease after a
// failed attach, and drops the lease; a DEL that fails too keeps the
// lease, for the caller's Remove or a later Reconcile.
func (r *Runtime) undoAttach(ctx context.Context, id, netns string, l *networkLease) {
	if err := r.cniDel(ctx, id, netns, l.Conflist, l.Published); err != nil {
		r.log.Warn("containerd: undo a failed network join", "container", id, "network", l.Network, "error", err)
		return
	}
	if err := r.dropLease(l.Namespace, id); err != nil {
		r.log.Warn("containerd: undo a failed network join", "container", id, "network", l.Network, "error", err)
	}
}

// cniDel is a CNI DEL from the configuration list of an ADD, bounded by
// cniTimeout even if ctx is done (it is clean-up, which must finish).
func (r *Runtime) cniDel(ctx context.Context, id, netns string, conflist []byte, published []runtime.PortBinding) error {
	c, err := r.cniFor(conflist)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cniTimeout)
	defer cancel()
	return c.Remove(ctx, id, netns, cni.WithCapabilityPortMap(portMappings(published)))
}

// detach deletes the container from the network it joined (CNI DEL):
// portmap and firewall rules, the IP allocation, the veth. netns is the
// task's network namespace while it lives, "" after (the plugins then
// clean up what they can without it). What it joined is the record's
// attachment, else the lease of an attach that was never recorded (the
// process died in between). A DEL that fails leaves a lease behind, so
// that Reconcile retries it once the container is gone.
func (r *Runtime) detach(ctx context.Context, id, netns string, rec *record) error {
	l, err := r.readLease(r.namespace, id)
	if err != nil {
		return err
	}
	if len(rec.Attached) > 0 {
		l = &networkLease{
			Namespace: r.namespace,
			Container: id,
			Network:   rec.Network,
			Conflist:  rec.Attached,
			Published: rec.Published,
			Created:   time.Now().UTC(),
		}
	}
	if l == nil {
		return nil
	}
	if err := r.cniDel(ctx, id, netns, l.Conflist, l.Published); err != nil {
		if werr := r.writeLease(*l); werr != nil {
			err = errors.Join(err, fmt.Errorf("keep a network lease for later: %w", werr))
		}
		return err
	}
	return r.dropLease(r.namespace, id)
}

// netnsPath is the network namespace of a process.
func netnsPath(pid uint32) string {
	return "/proc/" + strconv.FormatUint(uint64(pid), 10) + "/ns/net"
}

// portMappings are the bindings in portmap's terms.
func portMappings(ports []runtime.PortBinding) []cni.PortMapping {
	out := make([]cni.PortMapping, 0, len(ports))
	for _, p := range ports {
		out = append(out, cni.PortMapping{
			HostPort:      int32(p.HostPort),
			ContainerPort: int32(p.ContainerPort),
			Protocol:      p.Protocol,
			HostIP:        p.HostIP,
		})
	}
	return out
}

// ListNetworks returns the networks the adapter created (its default
// network aside) whose labels hold every pair of selector, from their
// definitions in the state dir.
func (r *Runtime) ListNetworks(ctx context.Context, selector map[string]string) ([]runtime.Network, error) {
	const op = runtime.OpListNetworks
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, ""); err != nil {
		return nil, err
	}
	defs, err := r.readNetworks()
	if err != nil {
		return nil, r.wrap(op, "", err)
	}
	out := []runtime.Network{}
	for _, def := range defs {
		if def.Name == DefaultNetwork || !matches(def.Labels, selector) {
			continue
		}
		out = append(out, def.network())
	}
	return out, nil
}

// matches tells whether labels hold every pair of selector.
func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
