package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/identifiers"
	"github.com/containerd/containerd/v2/plugins"

	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/internal/adapterkit"
)

// Run creates the container (see Create), then its task, joins it to its
// network (the spec's, or the default network) with the ports to publish,
// and starts it. If any step fails, everything made so far is removed
// before the error is returned.
func (r *Runtime) Run(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	const op = runtime.OpRun
	ctx = r.ctx(ctx)
	obj := object(spec)
	if err := r.ready(ctx, op, obj); err != nil {
		return runtime.Container{}, err
	}
	// The network state of containers that vanished half-way (a process
	// killed between its CNI ADD and the record, a DEL that failed) goes
	// first, so that it never piles up.
	r.reconcileQuietly(ctx)
	c, rec, err := r.create(ctx, op, spec)
	if err != nil {
		return runtime.Container{}, err
	}
	if err := r.start(ctx, op, obj, c, rec); err != nil {
		r.discard(ctx, op, c.ID())
		return runtime.Container{}, err
	}
	return r.inspect(ctx, op, c.ID())
}

// Create makes the container without a task: its snapshot, spec, labels,
// anonymous volumes and record. The image must be present (Create does not
// pull) and the network must exist (the default network is created on
// demand), as runtime.ContainerRuntime.Create says.
func (r *Runtime) Create(ctx context.Context, spec runtime.RunSpec) (runtime.Container, error) {
	const op = runtime.OpCreate
	ctx = r.ctx(ctx)
	if err := r.ready(ctx, op, object(spec)); err != nil {
		return runtime.Container{}, err
	}
	c, _, err := r.create(ctx, op, spec)
	if err != nil {
		return runtime.Container{}, err
	}
	return r.inspect(ctx, op, c.ID())
}

// object names the container in errors: its name, or its image when it has
// none yet.
func object(spec runtime.RunSpec) string {
	return adapterkit.Object(spec, spec.Image)
}

// create validates the spec and makes the container: a new random ID, the
// name (the spec's, or a random one) in its name label, taken under the
// name's lock (see name.go).
func (r *Runtime) create(ctx context.Context, op string, spec runtime.RunSpec) (client.Container, *record, error) {
	obj := object(spec)
	spec, err := spec.Normalize()
	if err != nil {
		return nil, nil, r.wrap(op, obj, err)
	}
	name := spec.Name
	if name == "" {
		name = randomName()
		obj = name
	}
	if err := identifiers.Validate(name); err != nil {
		return nil, nil, r.wrap(op, obj, adapterkit.WithKind(nil, "invalid container name: %v", err))
	}
	id := newID()
	ports := spec.Ports
	if err := checkLimits(spec); err != nil {
		return nil, nil, r.wrap(op, obj, err)
	}
	// From "is the name taken?" until the container exists, no other
	// create of the name (in any process) runs.
	unlock, err := r.lockName(ctx, name)
	if err != nil {
		return nil, nil, r.wrap(op, obj, err)
	}
	defer unlock()
	if taken, err := r.nameTaken(ctx, name); err != nil {
		return nil, nil, r.wrap(op, obj, err)
	} else if taken {
		return nil, nil, r.wrap(op, obj, adapterkit.WithKind(runtime.ErrAlreadyExists, "the name %q is taken", name))
	}
	network := spec.Network
	if network == "" {
		network = DefaultNetwork
	}
	def, err := r.network(op, obj, network)
	if err != nil {
		return nil, nil, err
	}
	if def.Internal && len(ports) > 0 {
		return nil, nil, r.wrap(op, obj, adapterkit.WithKind(runtime.ErrInvalid, "network %s is internal: no port can be published from it", network))
	}
	img, err := r.image(ctx, op, obj, spec.Image)
	if err != nil {
		return nil, nil, err
	}
	imgSpec, err := img.Spec(ctx)
	if err != nil {
		return nil, nil, r.wrap(op, obj, fmt.Errorf("image %q: config: %w", spec.Image, err))
	}

	// Everything below is made under a lease, so that the garbage
	// collector leaves it alone until the container references it; what a
	// failure leaves unreferenced is collected once the lease ends.
	ctx, done, err := r.client.WithLease(ctx)
	if err != nil {
		return nil, nil, r.wrap(op, obj, err)
	}
	defer done(context.WithoutCancel(ctx))

	vols := volumesFor(id, imgSpec.Config.Volumes, spec.Tmpfs)
	volMounts, volRefs, err := r.prepareVolumes(ctx, id, img, vols)
	if err != nil {
		return nil, nil, r.wrap(op, obj, err)
	}
	opts, err := specOpts(name, img, imgSpec.Config, spec, volMounts)
	if err != nil {
		_ = r.removeVolumes(context.WithoutCancel(ctx), vols)
		return nil, nil, r.wrap(op, obj, err)
	}
	rec := &record{
		Image:       spec.Image,
		StopSignal:  imgSpec.Config.StopSignal,
		Network:     network,
		Ports:       ports,
		Tmpfs:       tmpfsPaths(spec.Tmpfs),
		Volumes:     vols,
		Log:         r.logPath(id),
		EmptyLabels: emptyLabelKeys(spec.Labels),
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, volRefs)
	labels[NerdctlNameLabel] = name

	var runcOpts any
	if r.runcRoot != "" {
		runcOpts = &runcoptions.Options{Root: r.runcRoot}
	}
	c, err := r.client.NewContainer(ctx, id,
		client.WithSnapshotter(r.snapshotter),
		client.WithNewSnapshot(id, img),
		client.WithRuntime(plugins.RuntimeRuncV2, runcOpts),
		client.WithNewSpec(opts...),
		client.WithContainerLabels(labels),
		withRecord(rec),
	)
	if err != nil {
		_ = r.removeVolumes(context.WithoutCancel(ctx), vols)
		return nil, nil, r.wrap(op, obj, err)
	}
	if testHookCreated != nil {
		testHookCreated(name, id)
	}
	return c, rec, nil
}

// testHookCreated, when set (by tests only), is told the name and ID of
// each container made: the state a failed run leaves (or must not leave)
// is keyed by an ID the run never returned.
var testHookCreated func(name, id string)

// start creates the task (stdout and stderr to the container's log file),
// joins its network namespace to the network, records what that gave, and
// starts it. Errors name obj (the spec's name). The caller removes the
// container if start fails.
func (r *Runtime) start(ctx context.Context, op, obj string, c client.Container, rec *record) error {
	id := c.ID()
	def, err := r.network(op, obj, rec.Network)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(rec.Log), 0o700); err != nil {
		return r.wrap(op, obj, err)
	}
	task, err := c.NewTask(ctx, cio.LogFile(rec.Log))
	if err != nil {
		return r.wrap(op, obj, fmt.Errorf("create task: %w", err))
	}
	att, err := r.attach(ctx, id, task.Pid(), def, rec.Ports)
	if err != nil {
		return r.wrap(op, obj, r.diedStarting(ctx, id, task, err))
	}
	if testHookAttached != nil {
		testHookAttached(id)
	}
	rec.Attached = att.conflist
	rec.Addresses = map[string]string{def.Name: att.address}
	rec.Published = att.published
	if err := c.Update(ctx, client.UpdateContainerOpts(withRecord(rec))); err != nil {
		// Not recorded, so the caller's Remove would not know to undo it.
		if derr := r.detach(context.WithoutCancel(ctx), id, netnsPath(task.Pid()), rec); derr != nil {
			r.log.Warn("containerd: leave network after a failed run", "container", id, "network", def.Name, "error", derr)
		}
		return r.wrap(op, obj, fmt.Errorf("record the network attachment: %w", err))
	}
	// Recorded: from here on Remove leaves the network from the record.
	if err := r.dropLease(r.namespace, id); err != nil {
		r.log.Warn("containerd: run", "container", id, "error", err)
	}
	if err := task.Start(ctx); err != nil {
		return r.wrap(op, obj, fmt.Errorf("start task: %w", err))
	}
	return nil
}

// diedStarting explains a failure to join the network of a task that
// died before it started: its init process (runc's, which cgroup v2
// charges to the container) was OOM-killed under a memory limit too small
// for it, or exited. err (the netns that was gone) is kept as the cause.
func (r *Runtime) diedStarting(ctx context.Context, id string, task client.Task, err error) error {
	st, serr := task.Status(ctx)
	if serr != nil || st.Status != client.Stopped {
		return err
	}
	if r.oomKilled(ctx, []string{id})[id] {
		return fmt.Errorf("killed while starting: out of memory under its memory limit, before its process ran (the runtime's own start-up counts against it on cgroup v2: raise the limit): %w", err)
	}
	return fmt.Errorf("exited while starting (status %d), before its process ran: %w", st.ExitStatus, err)
}

// testHookAttached, when set (by tests only), runs once a task joined its
// network and before that is recorded: the window a crash test kills the
// process in.
var testHookAttached func(id string)

// discard removes a container whose run failed, even if ctx is done (see
// adapterkit.Discard).
func (r *Runtime) discard(ctx context.Context, op, id string) {
	_ = adapterkit.Discard(ctx, r.log, Name, op, id, r.remove)
}

// logPath is the file a container's task writes its stdout and stderr to.
func (r *Runtime) logPath(id string) string {
	return filepath.Join(r.stateDir, "logs", r.namespace, id+".log")
}

// randomName names a container that the run spec left unnamed.
func randomName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "sandboxer-" + hex.EncodeToString(b)
}
