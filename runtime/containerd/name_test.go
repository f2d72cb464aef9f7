package containerd

import (
	"context"
	"sync"
	"testing"
	"time"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testenv"
	"github.com/roboco/sandboxer/janitor"
	"github.com/roboco/sandboxer/labels"
	"github.com/roboco/sandboxer/runtime"
)

// TestIDsAreRandomAndTheNameIsALabel: a container's ID is 64 random hex
// digits and its name the label nerdctl/name, as ctr sees it; every verb
// takes the ID or the name; the name label is not among the labels the
// port reports.
func TestIDsAreRandomAndTheNameIsALabel(t *testing.T) {
	r := newTestRuntime(t)
	ctx := testContext(t)
	name := "sbx-test-" + randHex(4)
	track(t, r, name)
	c, err := r.Run(ctx, runtime.RunSpec{Name: name, Image: testenv.Image(t, Name, "busybox"), Command: []string{"sleep", "600"}, Labels: map[string]string{testLabel: "1"}})
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9a-f]{64}$`, c.ID)
	assert.Equal(t, name, c.Name)
	assert.Equal(t, map[string]string{testLabel: "1"}, c.Labels, "the name label is the adapter's")

	info, err := r.client.ContainerService().Get(r.ctx(ctx), c.ID)
	require.NoError(t, err, "containerd knows the container by its ID")
	assert.Equal(t, name, info.Labels[NerdctlNameLabel])

	for _, ref := range []string{c.ID, name} {
		got, err := r.Inspect(ctx, ref)
		require.NoError(t, err, "inspect %s", ref)
		assert.Equal(t, c.ID, got.ID)
		assert.Equal(t, name, got.Name)
		res, err := r.Exec(ctx, ref, runtime.ExecSpec{Cmd: []string{"true"}})
		require.NoError(t, err, "exec in %s", ref)
		assert.Equal(t, 0, res.ExitCode)
	}
	require.NoError(t, r.Kill(ctx, name))
	require.NoError(t, r.Stop(ctx, c.ID, 0))
	require.NoError(t, r.Remove(ctx, c.ID))
	_, err = r.Inspect(ctx, name)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "removed by ID, gone by name")
}

// TestConcurrentRunsOfOneNameMakeOne: runs of one name at once, from two
// adapters (two processes' worth of state: only the file lock is shared),
// make exactly one container; the others are ErrAlreadyExists.
func TestConcurrentRunsOfOneNameMakeOne(t *testing.T) {
	rs := []*Runtime{newTestRuntime(t), newTestRuntime(t)}
	ctx := testContext(t)
	busybox := testenv.Image(t, Name, "busybox")
	name := "sbx-test-" + randHex(4)
	track(t, rs[0], name)
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = rs[i%2].Create(ctx, runtime.RunSpec{Name: name, Image: busybox, Command: []string{"sleep", "600"}, Labels: map[string]string{testLabel: "1"}})
		})
	}
	wg.Wait()
	made := 0
	for _, err := range errs {
		if err == nil {
			made++
			continue
		}
		assert.ErrorIs(t, err, runtime.ErrAlreadyExists)
	}
	assert.Equal(t, 1, made, "one run made the container")
	list, err := rs[0].List(ctx, map[string]string{testLabel: "1"})
	require.NoError(t, err)
	count := 0
	for _, c := range list {
		if c.Name == name {
			count++
		}
	}
	assert.Equal(t, 1, count, "one container carries the name")
}

// TestOldSchemeContainersAreFoundJudgedAndRemoved is the migration: a
// sandbox made when the adapter's container ID was its name (seeded here
// with the containerd client, as that adapter made it: ID = name, no name
// label, the adapter's record, a running task) is listed, inspected and
// snapshot under its name; its name is taken for a new Run; a janitor
// sweep judges its owner gone and removes it; and then the name runs
// again, under a random ID.
func TestOldSchemeContainersAreFoundJudgedAndRemoved(t *testing.T) {
	r := newTestRuntime(t)
	ctx := testContext(t)
	busybox := testenv.Image(t, Name, "busybox")
	prefix := "sbxt" + randHex(4)
	keys := labels.For(prefix)
	name := "sbx-test-old-" + randHex(4)
	track(t, r, name)
	lbls := map[string]string{testLabel: "1", keys.Sandbox: labels.SandboxValue, keys.Owner: "sbx-test-gone-" + randHex(4)}
	seedOldScheme(t, r, name, busybox, lbls)

	got, err := r.Inspect(ctx, name)
	require.NoError(t, err, "inspect by the old ID, which is the name")
	assert.Equal(t, name, got.ID)
	assert.Equal(t, name, got.Name, "its name is its ID")
	assert.Equal(t, runtime.StateRunning, got.State)
	assert.Equal(t, lbls, got.Labels)

	list, err := r.List(ctx, map[string]string{keys.Sandbox: labels.SandboxValue})
	require.NoError(t, err)
	require.Len(t, list, 1, "listed")
	assert.Equal(t, name, list[0].Name)
	snap, err := r.Snapshot(ctx, map[string]string{keys.Sandbox: labels.SandboxValue})
	require.NoError(t, err)
	require.Len(t, snap.Matched, 1, "snapshot")
	assert.Equal(t, name, snap.Matched[0].Name)
	assert.True(t, snap.Exists(name), "known by its name")

	spec := runtime.RunSpec{Name: name, Image: busybox, Command: []string{"sleep", "600"}, Labels: map[string]string{testLabel: "1"}}
	_, err = r.Run(ctx, spec)
	assert.ErrorIs(t, err, runtime.ErrAlreadyExists, "its name is taken")
	_, err = r.Create(ctx, spec)
	assert.ErrorIs(t, err, runtime.ErrAlreadyExists, "its name is taken")

	later := func() time.Time { return time.Now().Add(time.Hour) } // past any grace
	j, err := janitor.New(r, janitor.Options{Prefix: prefix, Now: later})
	require.NoError(t, err)
	rep, err := j.Sweep(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Removed, 1, "the orphan is removed: %s", rep)
	assert.Equal(t, name, rep.Removed[0].Name)
	_, err = r.Inspect(ctx, name)
	assert.ErrorIs(t, err, runtime.ErrNotFound, "gone")

	c, err := r.Run(ctx, spec)
	require.NoError(t, err, "the name is free again")
	assert.NotEqual(t, name, c.ID, "under a random ID")
	assert.Equal(t, name, c.Name)
}

// seedOldScheme makes a container as the adapter did before its IDs were
// random: the ID is the name, there is no name label, and a task runs.
func seedOldScheme(t *testing.T, r *Runtime, name, image string, lbls map[string]string) {
	t.Helper()
	ctx := r.ctx(testContext(t))
	img, err := r.client.GetImage(ctx, image)
	require.NoError(t, err)
	var runcOpts any
	if r.runcRoot != "" {
		runcOpts = &runcoptions.Options{Root: r.runcRoot}
	}
	c, err := r.client.NewContainer(ctx, name,
		client.WithSnapshotter(r.snapshotter),
		client.WithNewSnapshot(name, img),
		client.WithRuntime(plugins.RuntimeRuncV2, runcOpts),
		client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs("sleep", "600")),
		client.WithContainerLabels(lbls),
		withRecord(&record{Image: image}),
	)
	require.NoError(t, err, "seed %s", name)
	task, err := c.NewTask(ctx, cio.NullIO)
	require.NoError(t, err)
	require.NoError(t, task.Start(ctx))
	t.Cleanup(func() { _ = r.Remove(context.WithoutCancel(ctx), name) })
}
