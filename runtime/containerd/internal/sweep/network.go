package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
)

// runner runs a command and returns its standard output; an error carries
// its standard error.
type runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// execRunner runs commands for real.
func execRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// hostNetwork is the host-side networking the adapter's containers leave
// behind when they are not removed through the adapter (a test killed
// half-way, a daemon stopped under them), and how to remove it.
type hostNetwork struct {
	owner owner
	// tables are the iptables tables to sweep.
	tables []string
	// cniCacheDir is libcni's cache (results under <dir>/results).
	cniCacheDir string
	// stateDir is the adapter's state dir: network definitions, IP
	// allocations, port reservations, task logs.
	stateDir string
	// dryRun prints what would be removed and changes nothing.
	dryRun bool
	run    runner
	// out gets one line per object removed (or, dry, to be removed).
	out io.Writer
	// warn gets what was left alone, and why.
	warn io.Writer
}

// sweep removes, in this order, the adapter's veths and bridges, its
// iptables rules and the CNI chains they leave dead, the CNI results of its
// containers and its state dir. It goes on after a failure and returns
// every failure. It must run only when no container of the adapter runs:
// it cannot tell a live container's rules from a dead one's.
func (h *hostNetwork) sweep(ctx context.Context) error {
	return errors.Join(
		h.sweepLinks(),
		h.sweepIPTables(ctx),
		h.sweepResults(),
		h.sweepStateDir(),
	)
}

// ownLinks picks from the host's links the adapter's bridges and the veths
// still enslaved to one of them (deleting a bridge sets its veths free, and
// from then on nothing tells them from anyone else's).
func ownLinks(links []netlink.Link, ownsBridge func(string) bool) (veths, bridges []netlink.Link) {
	ours := map[int]bool{}
	for _, l := range links {
		if l.Type() == "bridge" && ownsBridge(l.Attrs().Name) {
			bridges = append(bridges, l)
			ours[l.Attrs().Index] = true
		}
	}
	for _, l := range links {
		if l.Type() == "veth" && l.Attrs().MasterIndex != 0 && ours[l.Attrs().MasterIndex] {
			veths = append(veths, l)
		}
	}
	return veths, bridges
}

// sweepLinks deletes the adapter's veths, then its bridges.
func (h *hostNetwork) sweepLinks() error {
	links, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("list network interfaces: %w", err)
	}
	veths, bridges := ownLinks(links, h.owner.ownsBridge)
	var errs []error
	for _, l := range slices.Concat(veths, bridges) {
		name := l.Attrs().Name
		fmt.Fprintf(h.out, "link delete %s (%s)\n", name, l.Type())
		if h.dryRun {
			continue
		}
		if err := netlink.LinkDel(l); err != nil {
			// Deleting one end of a veth deletes its peer: a link that is
			// gone is no failure.
			var nf netlink.LinkNotFoundError
			if _, lerr := netlink.LinkByName(name); errors.As(lerr, &nf) {
				continue
			}
			errs = append(errs, fmt.Errorf("delete %s %s: %w", l.Type(), name, err))
		}
	}
	return errors.Join(errs...)
}

// sweepIPTables runs each table's plan.
func (h *hostNetwork) sweepIPTables(ctx context.Context) error {
	var errs []error
	for _, name := range h.tables {
		listing, err := h.run(ctx, "iptables", "-w", "-t", name, "-S")
		if err != nil {
			// A table the kernel does not have holds nothing of ours; no
			// iptables at all means the plugins could not have added any.
			fmt.Fprintf(h.warn, "iptables: table %s not swept: %v\n", name, err)
			continue
		}
		t, err := parseTable(name, string(listing))
		if err != nil {
			errs = append(errs, fmt.Errorf("iptables: %w", err))
			continue
		}
		for _, op := range t.plan(h.owner) {
			args := append([]string{"-w", "-t", name}, op...)
			quoted := make([]string, len(args))
			for i, a := range args {
				quoted[i] = quoteArg(a)
			}
			fmt.Fprintf(h.out, "iptables %s\n", strings.Join(quoted, " "))
			if h.dryRun {
				continue
			}
			if _, err := h.run(ctx, "iptables", args...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// cniResult is the part of a libcni result cache file (cniCacheV1) that
// says whose it is.
type cniResult struct {
	ContainerID string `json:"containerId"`
	Result      struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	} `json:"result"`
}

// ownsResult tells whether a cached CNI result is the adapter's: it gave
// an address of the pool, or it belongs to a leftover container (the
// loopback network's results, 127.0.0.1, are found that way only).
func (o owner) ownsResult(data []byte) bool {
	var r cniResult
	if err := json.Unmarshal(data, &r); err != nil {
		return false // not a result libcni wrote: not ours to judge
	}
	if slices.Contains(o.ids, r.ContainerID) && r.ContainerID != "" {
		return true
	}
	for _, ip := range r.Result.IPs {
		if p, err := netip.ParsePrefix(ip.Address); err == nil && o.pool.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// sweepResults removes the CNI results cached for the adapter's containers.
// libcni caches every ADD's result under <cache>/results (go-cni offers no
// other place) and DEL removes it, so only containers that were never
// removed through the adapter leave some.
func (h *hostNetwork) sweepResults() error {
	dir := filepath.Join(h.cniCacheDir, "results")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("CNI results: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("CNI results: %w", err))
			continue
		}
		if !h.owner.ownsResult(data) {
			continue
		}
		fmt.Fprintf(h.out, "remove %s\n", path)
		if h.dryRun {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("CNI results: %w", err))
		}
	}
	return errors.Join(errs...)
}

// sweepStateDir removes the adapter's state dir: with every container and
// bridge gone, its network definitions, IP allocations, port reservations
// and task logs describe nothing.
func (h *hostNetwork) sweepStateDir() error {
	if h.stateDir == "" {
		return nil
	}
	if _, err := os.Lstat(h.stateDir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	fmt.Fprintf(h.out, "remove %s\n", h.stateDir)
	if h.dryRun {
		return nil
	}
	if err := os.RemoveAll(h.stateDir); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return nil
}
