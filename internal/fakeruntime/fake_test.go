package fakeruntime_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/fakeruntime"
	"github.com/roboco/sandboxer/runtime"
)

const img = "example/db:1"

func TestPortContract(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, f *fakeruntime.Runtime)
	}{
		{"RunWithoutImageIsImageNotFound", func(t *testing.T, f *fakeruntime.Runtime) {
			_, err := f.Run(ctx, runtime.RunSpec{Name: "a", Image: "absent:1"})
			assert.ErrorIs(t, err, runtime.ErrImageNotFound)
		}},
		{"PullMakesRemoteImagePresent", func(t *testing.T, f *fakeruntime.Runtime) {
			f.AddRemoteImage("remote:1")
			ok, err := f.ImageExists(ctx, "remote:1")
			require.NoError(t, err)
			require.False(t, ok)
			require.NoError(t, f.PullImage(ctx, "remote:1", nil))
			ok, err = f.ImageExists(ctx, "remote:1")
			require.NoError(t, err)
			assert.True(t, ok)
			assert.ErrorIs(t, f.PullImage(ctx, "nowhere:1", nil), runtime.ErrImageNotFound)
		}},
		{"SecondRunUnderLiveNameIsAlreadyExists", func(t *testing.T, f *fakeruntime.Runtime) {
			_, err := f.Run(ctx, runtime.RunSpec{Name: "a", Image: img})
			require.NoError(t, err)
			_, err = f.Run(ctx, runtime.RunSpec{Name: "a", Image: img})
			assert.ErrorIs(t, err, runtime.ErrAlreadyExists)
		}},
		{"InspectAbsentIsNotFound", func(t *testing.T, f *fakeruntime.Runtime) {
			_, err := f.Inspect(ctx, "nope")
			assert.ErrorIs(t, err, runtime.ErrNotFound)
		}},
		{"RemoveAbsentAndKillStoppedAreNoErrors", func(t *testing.T, f *fakeruntime.Runtime) {
			assert.NoError(t, f.Remove(ctx, "nope"))
			c, err := f.Run(ctx, runtime.RunSpec{Name: "a", Image: img})
			require.NoError(t, err)
			require.NoError(t, f.Kill(ctx, c.ID))
			assert.NoError(t, f.Kill(ctx, c.ID))
			assert.NoError(t, f.Stop(ctx, c.Name, time.Second))
			got, err := f.Inspect(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, runtime.StateExited, got.State)
			assert.Equal(t, 137, got.ExitCode)
		}},
		{"ListMatchesEveryPairInEveryState", func(t *testing.T, f *fakeruntime.Runtime) {
			_, err := f.Run(ctx, runtime.RunSpec{Name: "a", Image: img, Labels: map[string]string{"k": "1", "o": "x"}})
			require.NoError(t, err)
			_, err = f.Create(ctx, runtime.RunSpec{Name: "b", Image: img, Labels: map[string]string{"k": "1", "o": "y"}})
			require.NoError(t, err)
			_, err = f.Run(ctx, runtime.RunSpec{Name: "c", Image: img, Labels: map[string]string{"k": "2"}})
			require.NoError(t, err)
			require.NoError(t, f.Kill(ctx, "c"))
			all, err := f.List(ctx, map[string]string{"k": "1"})
			require.NoError(t, err)
			assert.Equal(t, []string{"a", "b"}, names(all))
			one, err := f.List(ctx, map[string]string{"k": "1", "o": "y"})
			require.NoError(t, err)
			assert.Equal(t, []string{"b"}, names(one))
			assert.Equal(t, runtime.StateCreated, one[0].State)
		}},
		{"RemoveDeletesAnonymousVolumes", func(t *testing.T, f *fakeruntime.Runtime) {
			f.AddImage("vol:1", "/data", "/cache")
			_, err := f.Run(ctx, runtime.RunSpec{Name: "a", Image: "vol:1", Tmpfs: map[string]string{"/data": ""}})
			require.NoError(t, err)
			assert.Len(t, f.Volumes(), 1, "only /cache, not covered by a tmpfs, gets a volume")
			require.NoError(t, f.Remove(ctx, "a"))
			assert.Empty(t, f.Volumes())
		}},
		{"NetworksAndPublishedPorts", func(t *testing.T, f *fakeruntime.Runtime) {
			_, err := f.Run(ctx, runtime.RunSpec{Name: "x", Image: img, Network: "n1"})
			assert.ErrorIs(t, err, runtime.ErrNotFound, "joining an absent network")
			_, err = f.CreateNetwork(ctx, runtime.NetworkSpec{Name: "n1"})
			require.NoError(t, err)
			_, err = f.CreateNetwork(ctx, runtime.NetworkSpec{Name: "n1"})
			assert.ErrorIs(t, err, runtime.ErrAlreadyExists)
			sib, err := f.Run(ctx, runtime.RunSpec{Name: "sib", Image: img, Network: "n1"})
			require.NoError(t, err)
			assert.NotEmpty(t, sib.Networks["n1"])
			host, err := f.Run(ctx, runtime.RunSpec{Name: "host", Image: img, Ports: []runtime.PortSpec{{ContainerPort: 5432}}})
			require.NoError(t, err)
			require.Len(t, host.Ports, 1)
			assert.Equal(t, "127.0.0.1", host.Ports[0].HostIP)
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", host.Ports[0].HostPort))
			require.NoError(t, err, "a published port accepts connections")
			conn.Close()
			require.NoError(t, f.Remove(ctx, "host"))
			_, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", host.Ports[0].HostPort))
			assert.Error(t, err, "a removed container's port is closed")
			assert.ErrorIs(t, f.RemoveNetwork(ctx, "n1"), runtime.ErrInUse, "sib is still on it")
			list, err := f.ListNetworks(ctx, nil)
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, "n1", list[0].Name)
			require.NoError(t, f.Remove(ctx, "sib"))
			assert.NoError(t, f.RemoveNetwork(ctx, "n1"))
			assert.NoError(t, f.RemoveNetwork(ctx, "n1"))
		}},
		{"ScriptedExecPerContainer", func(t *testing.T, f *fakeruntime.Runtime) {
			f.Script("probe", fakeruntime.Result{ExitCode: 1, Stderr: "starting"}, fakeruntime.Result{Stdout: "ok"})
			for _, n := range []string{"a", "b"} {
				_, err := f.Run(ctx, runtime.RunSpec{Name: n, Image: img})
				require.NoError(t, err)
				r1, err := f.Exec(ctx, n, runtime.ExecSpec{Cmd: []string{"probe"}})
				require.NoError(t, err)
				assert.Equal(t, 1, r1.ExitCode)
				assert.Equal(t, "starting", string(r1.Stderr))
				for range 2 {
					r, err := f.Exec(ctx, n, runtime.ExecSpec{Cmd: []string{"probe"}})
					require.NoError(t, err)
					assert.Equal(t, "ok", string(r.Stdout), "the last result repeats")
				}
			}
			r, err := f.Exec(ctx, "a", runtime.ExecSpec{Cmd: []string{"other"}})
			require.NoError(t, err)
			assert.Zero(t, r.ExitCode)
			require.NoError(t, f.Kill(ctx, "a"))
			_, err = f.Exec(ctx, "a", runtime.ExecSpec{Cmd: []string{"probe"}})
			assert.Error(t, err, "exec in a stopped container")
		}},
		{"InjectedFailures", func(t *testing.T, f *fakeruntime.Runtime) {
			f.FailNth(fakeruntime.VerbRun, 2, runtime.ErrUnavailable)
			f.Fail(fakeruntime.VerbRemove, "b", errors.New("stuck"))
			_, err := f.Run(ctx, runtime.RunSpec{Name: "a", Image: img})
			require.NoError(t, err)
			_, err = f.Run(ctx, runtime.RunSpec{Name: "b", Image: img})
			require.ErrorIs(t, err, runtime.ErrUnavailable)
			var re *runtime.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, "run", re.Op)
			assert.Equal(t, "b", re.Object)
			_, err = f.Run(ctx, runtime.RunSpec{Name: "b", Image: img})
			require.NoError(t, err)
			assert.Error(t, f.Remove(ctx, "b"))
			assert.NoError(t, f.Remove(ctx, "a"))
			assert.Equal(t, 3, f.Calls(fakeruntime.VerbRun))
			assert.Equal(t, 2, f.Calls(fakeruntime.VerbRemove))
		}},
		{"ClockStampsCreation", func(t *testing.T, f *fakeruntime.Runtime) {
			at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
			f.SetClock(func() time.Time { return at })
			c, err := f.Run(ctx, runtime.RunSpec{Name: "a", Image: img})
			require.NoError(t, err)
			assert.Equal(t, at, c.Created)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeruntime.New()
			f.AddImage(img)
			t.Cleanup(func() { f.Close() })
			tt.run(t, f)
		})
	}
}

func TestMaxInFlightCountsConcurrentCalls(t *testing.T) {
	f := fakeruntime.New()
	f.AddImage(img)
	const n = 3
	arrived := make(chan struct{}, n)
	release := make(chan struct{})
	f.OnCall(func(ctx context.Context, c fakeruntime.Call) error {
		if c.Verb != fakeruntime.VerbRun {
			return nil
		}
		arrived <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := f.Run(context.Background(), runtime.RunSpec{Name: fmt.Sprint("c", i), Image: img})
			errs <- err
		}()
	}
	for range n {
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			t.Fatal("runs did not all start")
		}
	}
	close(release)
	for range n {
		require.NoError(t, <-errs)
	}
	assert.Equal(t, n, f.MaxInFlight(fakeruntime.VerbRun))
	assert.Len(t, f.Containers(), n)
}

func names(cs []runtime.Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// TestIDsAreNeverReused: the fake, as every backend, never gives a
// container an ID another container had: a run under a removed name gets
// a new ID, and seeding an ID it has had panics, even once that container
// is gone.
func TestIDsAreNeverReused(t *testing.T) {
	f := fakeruntime.New()
	t.Cleanup(func() { f.Close() })
	c := f.Seed(runtime.Container{Name: "roboco-sandbox-pg-1"})
	require.NoError(t, f.Remove(context.Background(), c.ID))
	d := f.Seed(runtime.Container{Name: c.Name})
	assert.NotEqual(t, c.ID, d.ID, "a new container under the name has a new ID")
	assert.Panics(t, func() { f.Seed(runtime.Container{ID: c.ID, Name: c.Name}) }, "an ID given out before")
}
