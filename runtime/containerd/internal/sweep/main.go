// Command sweep cleans up after the containerd adapter's containers when
// tests died half-way, for hack/env/containerd.sh down. It knows what is the
// adapter's from the adapter's own constants (containerd.BridgePrefix,
// containerd.SubnetPool, containerd.DefaultStateDir), so that no script
// spells them out again.
//
//	sweep [containers]
//	    Removes every container of the adapter's containerd namespace
//	    through the adapter itself, so that each leaves its network properly
//	    (CNI DEL with the configuration it joined with) before its task and
//	    snapshot go. It reads CONTAINERD_ADDRESS, CONTAINERD_NAMESPACE and
//	    the adapter's other settings like the adapter does, and prints the
//	    removed containers' names. Then it reconciles the adapter's network
//	    leases: the CNI state of containers that are gone (a process killed
//	    between its CNI ADD and recording it, a DEL that failed) is deleted
//	    (CNI DEL) while the adapter still knows what it was.
//
//	sweep network [-leftover-ids ID,...] [-dry-run] [-state-dir DIR] [-cni-cache-dir DIR] [-pool CIDR -bridge NAME]
//	    Removes what the adapter's CNI networking left on the host: the
//	    adapter's bridges (BridgePrefix) and the veths on them; iptables
//	    rules (filter, nat, mangle) that name an address of SubnetPool,
//	    match on one of those bridges, or whose comment names a leftover
//	    container; the CNI-* chains that leaves empty or dead (portmap's
//	    CNI-DN-* and CNI-HOSTPORT-* plumbing included) with the rules that
//	    jump to them; libcni's cached results of those containers or
//	    addresses; and the adapter's state dir. A chain that still holds
//	    someone else's rule stays. -pool and -bridge name another CNI
//	    network to sweep the same way instead of the adapter's (the
//	    Kubernetes test cluster's, for hack/env/kubernetes.sh down). It
//	    needs no daemon, and must run only
//	    when no container of the adapter runs: it cannot tell a live
//	    container's rules from a dead one's. It prints one line per object
//	    removed.
//
// Exit status: 0 when everything was removed, 1 when something could not
// be (each failure on stderr), 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/roboco/sandboxer/runtime/containerd"
)

// sweepTimeout bounds a whole run, so that a hung daemon or iptables lock
// cannot hold `hack/env.sh down` forever.
const sweepTimeout = 5 * time.Minute

func main() {
	mode, args := "containers", os.Args[1:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	var err error
	switch mode {
	case "containers":
		err = containersCmd(args)
	case "network":
		err = networkCmd(args)
	default:
		fmt.Fprintf(os.Stderr, "sweep: unknown mode %q: want containers or network\n", mode)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err)
		os.Exit(1)
	}
}

// containersCmd is `sweep containers`.
func containersCmd(args []string) error {
	fs := flag.NewFlagSet("sweep containers", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return flag.ErrHelp
	}
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	return sweepContainers(ctx, os.Stdout, os.Stderr)
}

// networkCmd is `sweep network`.
func networkCmd(args []string) error {
	fs := flag.NewFlagSet("sweep network", flag.ContinueOnError)
	ids := fs.String("leftover-ids", "", "`ids` of the containers left behind, comma or blank separated (as ctr containers ls -q prints them): rules and CNI results that name one go even without an address of the pool")
	dryRun := fs.Bool("dry-run", false, "print what would be removed, remove nothing")
	stateDir := fs.String("state-dir", containerd.DefaultStateDir, "the adapter's state dir, removed whole (empty: keep it)")
	cniCacheDir := fs.String("cni-cache-dir", libcni.CacheDir, "libcni's cache dir, whose results/ holds the cached ADD results")
	poolFlag := fs.String("pool", "", "sweep the network of this `CIDR` instead of the adapter's pool (with -bridge)")
	bridge := fs.String("bridge", "", "sweep this bridge `name` instead of the adapter's bridges (with -pool)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return flag.ErrHelp
	}
	o, err := networkOwner(*poolFlag, *bridge, *ids)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	h := &hostNetwork{
		owner:       o,
		tables:      []string{"filter", "nat", "mangle"},
		cniCacheDir: *cniCacheDir,
		stateDir:    *stateDir,
		dryRun:      *dryRun,
		run:         execRunner,
		out:         os.Stdout,
		warn:        os.Stderr,
	}
	return h.sweep(ctx)
}

// networkOwner is what `sweep network` takes for its own: the adapter's pool
// and bridges, or (-pool and -bridge, both or neither) another network's
// pool and its one bridge; and the leftover container ids.
func networkOwner(pool, bridge, ids string) (owner, error) {
	o := owner{
		pool:       containerd.SubnetPool(),
		ownsBridge: containerd.OwnsBridge,
		ids:        strings.FieldsFunc(ids, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }),
	}
	if (pool == "") != (bridge == "") {
		return owner{}, errors.New("-pool and -bridge go together")
	}
	if pool == "" {
		return o, nil
	}
	p, err := netip.ParsePrefix(pool)
	if err != nil {
		return owner{}, fmt.Errorf("-pool: %w", err)
	}
	o.pool, o.ownsBridge = p.Masked(), func(name string) bool { return name == bridge }
	return o, nil
}
