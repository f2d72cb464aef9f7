package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/roboco/sandboxer/runtime"
)

// cniTimeout bounds one CNI ADD or DEL (every plugin of the list). ADD runs
// under it alone, not under the caller's context: a plugin killed half-way
// (the caller's deadline ending while the firewall plugin writes its
// rules) leaves state that no DEL can find, since libcni caches a result,
// which DEL hands the plugins, only once every plugin succeeded.
const cniTimeout = time.Minute

// networkLease is the adapter's intent to have a container on a network,
// written to the state dir (leases/<namespace>/<container>.json) before the
// CNI ADD and removed once the attachment is in the container's record (or
// undone). A lease that is still there names CNI state that nothing else
// will remove: the process died between the ADD and the record, or a DEL
// failed. Remove undoes it for a container that still exists; Reconcile
// for one that no longer does.
type networkLease struct {
	Namespace string `json:"namespace"`
	Container string `json:"container"`
	Network   string `json:"network"`
	// Pid is the task whose network namespace joined, for diagnostics
	// only: once the container is gone the pid may be anyone's, so a DEL
	// from a lease never enters it.
	Pid uint32 `json:"pid,omitempty"`
	// Conflist is the configuration list of the ADD, which the DEL must
	// be given again.
	Conflist  json.RawMessage       `json:"conflist"`
	Published []runtime.PortBinding `json:"published,omitempty"`
	Created   time.Time             `json:"created"`
}

func (r *Runtime) leasesDir() string { return filepath.Join(r.stateDir, "leases") }

func (r *Runtime) leaseFile(namespace, id string) string {
	return filepath.Join(r.leasesDir(), namespace, id+".json")
}

// writeLease records the intent to attach, atomically.
func (r *Runtime) writeLease(l networkLease) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	file := r.leaseFile(l.Namespace, l.Container)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// takeLease writes the lease of a container that is about to join its
// network, under the leases lock. The container was just made, under an
// ID no container had before, so a lease under its ID is one a container
// made when the ID was the name left (a DEL that failed, not yet
// reconciled). It is undone first (without a network namespace: that one
// is gone), or the new lease would hide it and the ADD would find its
// address taken. The lock is what keeps a reconcile from undoing the new
// container's network: one that found the ID's container gone (the
// previous one) and then read the lease would otherwise read this one and
// DEL it, and a DEL by container ID releases the new container's address
// and removes its portmap and firewall rules. With the lock, a reconcile
// either ends before (and undid the old lease itself) or starts after, and
// then finds the container.
func (r *Runtime) takeLease(ctx context.Context, l networkLease) error {
	unlock, err := lockDir(r.ctx(ctx), r.leasesDir(), true)
	if err != nil {
		return fmt.Errorf("lock the network leases: %w", err)
	}
	defer unlock()
	old, err := r.readLease(l.Namespace, l.Container)
	if err != nil {
		return err
	}
	if old != nil {
		if err := r.cniDel(ctx, l.Container, "", old.Conflist, old.Published); err != nil {
			return fmt.Errorf("leave what a previous container %s left on network %s: %w", l.Container, old.Network, err)
		}
	}
	if err := r.writeLease(l); err != nil {
		return fmt.Errorf("write the network lease: %w", err)
	}
	return nil
}

// dropLease removes a container's lease, if any.
func (r *Runtime) dropLease(namespace, id string) error {
	if err := os.Remove(r.leaseFile(namespace, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("drop the network lease of %s: %w", id, err)
	}
	return nil
}

// readLease reads a container's lease; nil when it has none.
func (r *Runtime) readLease(namespace, id string) (*networkLease, error) {
	b, err := os.ReadFile(r.leaseFile(namespace, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l networkLease
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("network lease %s: %w", r.leaseFile(namespace, id), err)
	}
	return &l, nil
}

// leaseNamespaces lists the namespaces that hold leases.
func (r *Runtime) leaseNamespaces() ([]string, error) {
	entries, err := os.ReadDir(r.leasesDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// leasedContainers lists the containers of a namespace that hold a lease.
func (r *Runtime) leasedContainers(namespace string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(r.leasesDir(), namespace))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !e.IsDir() {
			out = append(out, id)
		}
	}
	return out, nil
}

// Reconcile removes the CNI state of the adapter's containers that no
// longer exist: for each network lease (see networkLease) whose container
// is gone from its namespace, a CNI DEL with the configuration of the ADD
// and no network namespace (that died with the task) releases the
// host-local address and removes the portmap and firewall rules, which
// name the container; then the lease goes. A lease of a container that
// still exists is left to its Remove; nothing is removed that no lease
// names. Run reconciles before it creates, the janitor on each sweep (gc;
// this implements runtime.Reconciler), and `sweep containers` (make
// env-down) after its removals.
func (r *Runtime) Reconcile(ctx context.Context) error {
	return r.reconcile(ctx, true)
}

// reconcile is Reconcile; unless wait, it does nothing while another
// process (or goroutine) reconciles, which then does it for both.
func (r *Runtime) reconcile(ctx context.Context, wait bool) error {
	ctx = r.ctx(ctx)
	unlock, err := lockDir(ctx, r.leasesDir(), wait)
	if errors.Is(err, errLocked) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock the network leases: %w", err)
	}
	defer unlock()
	nsList, err := r.leaseNamespaces()
	if err != nil {
		return fmt.Errorf("network leases: %w", err)
	}
	var errs []error
	for _, ns := range nsList {
		ids, err := r.leasedContainers(ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		nsCtx := namespaces.WithNamespace(ctx, ns)
		for _, id := range ids {
			if err := r.reconcileLease(nsCtx, ns, id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// reconcileLease undoes one lease if its container is gone.
func (r *Runtime) reconcileLease(ctx context.Context, ns, id string) error {
	_, err := r.client.ContainerService().Get(ctx, id)
	switch {
	case err == nil:
		return nil // its Remove will leave the network
	case !cerrdefs.IsNotFound(err):
		return fmt.Errorf("network lease of %s/%s: look up the container: %w", ns, id, err)
	}
	if testHookLeaseOrphaned != nil {
		testHookLeaseOrphaned(ns, id)
	}
	l, err := r.readLease(ns, id)
	if err != nil || l == nil {
		return err
	}
	if err := r.cniDel(ctx, id, "", l.Conflist, l.Published); err != nil {
		return fmt.Errorf("network lease of %s/%s: leave network %s: %w", ns, id, l.Network, err)
	}
	r.log.Info("containerd: removed the network state of a container that is gone", "namespace", ns, "container", id, "network", l.Network)
	return r.dropLease(ns, id)
}

// testHookLeaseOrphaned, when set (by tests only), runs when a reconcile
// found that the container of a lease is gone, before it reads the lease.
var testHookLeaseOrphaned func(ns, id string)

// reconcileQuietly is Reconcile for the verbs that do it on the way: a
// failure is logged and left for the next one.
func (r *Runtime) reconcileQuietly(ctx context.Context) {
	if err := r.reconcile(ctx, false); err != nil {
		r.log.Warn("containerd: reconcile network leases", "error", err)
	}
}
