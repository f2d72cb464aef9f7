package adaptertest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/runtime"
	"github.com/roboco/sandboxer/runtime/dockerarchive"
)

// UnreachableLimit is how long any verb may take to report an unreachable
// endpoint.
const UnreachableLimit = 2 * time.Second

// Endpoint is one way for a backend not to be there.
type Endpoint struct {
	// Name names the subtest.
	Name string
	// Addr returns the address to give the adapter, standing up (until the
	// test ends) whatever is to answer there.
	Addr func(t *testing.T) string
	// Env says the adapter finds Addr through its environment variable
	// rather than through an option.
	Env bool
}

// Place puts addr where ep says the adapter finds it: in the adapter's
// environment variable env (for the test), and then it returns "", or in
// an option, and then env is cleared and it returns addr to pass.
func (ep Endpoint) Place(t *testing.T, env, addr string) (option string) {
	if ep.Env {
		t.Setenv(env, addr)
		return ""
	}
	t.Setenv(env, "")
	return addr
}

// Open makes the adapter under test for ep at addr, without contacting the
// backend, and checks what the adapter reports as its endpoint. The
// runtime is closed when the test ends.
type Open func(t *testing.T, ep Endpoint, addr string) runtime.ContainerRuntime

// store is r's image store: every adapter these tests open has one.
func store(r runtime.ContainerRuntime) runtime.ImageStore {
	s, _ := runtime.As[runtime.ImageStore](r)
	return s
}

// unreachableVerbs are all the verbs of the port and of runtime.ImageStore.
var unreachableVerbs = []struct {
	name string
	call func(ctx context.Context, r runtime.ContainerRuntime) error
}{
	{"Version", func(ctx context.Context, r runtime.ContainerRuntime) error { _, err := r.Version(ctx); return err }},
	{"ImageExists", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := store(r).ImageExists(ctx, "busybox")
		return err
	}},
	{"PullImage", func(ctx context.Context, r runtime.ContainerRuntime) error {
		return store(r).PullImage(ctx, "busybox", nil)
	}},
	{"ImageID", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := store(r).ImageID(ctx, "busybox")
		return err
	}},
	{"SaveImage", func(ctx context.Context, r runtime.ContainerRuntime) error {
		return store(r).SaveImage(ctx, "busybox", io.Discard)
	}},
	{"LoadImage", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := store(r).LoadImage(ctx, bytes.NewReader(tinyArchive()))
		return err
	}},
	{"RemoveImage", func(ctx context.Context, r runtime.ContainerRuntime) error {
		return store(r).RemoveImage(ctx, "busybox")
	}},
	{"Run", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.Run(ctx, runtime.RunSpec{Name: "c1", Image: "busybox"})
		return err
	}},
	{"Create", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.Create(ctx, runtime.RunSpec{Name: "c1", Image: "busybox"})
		return err
	}},
	{"Inspect", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.Inspect(ctx, "c1")
		return err
	}},
	{"Exec", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.Exec(ctx, "c1", runtime.ExecSpec{Cmd: []string{"true"}})
		return err
	}},
	{"Stop", func(ctx context.Context, r runtime.ContainerRuntime) error { return r.Stop(ctx, "c1", time.Second) }},
	{"Kill", func(ctx context.Context, r runtime.ContainerRuntime) error { return r.Kill(ctx, "c1") }},
	{"Remove", func(ctx context.Context, r runtime.ContainerRuntime) error { return r.Remove(ctx, "c1") }},
	{"List", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.List(ctx, map[string]string{"a": "b"})
		return err
	}},
	{"CreateNetwork", func(ctx context.Context, r runtime.ContainerRuntime) error {
		_, err := r.CreateNetwork(ctx, runtime.NetworkSpec{Name: "n1"})
		return err
	}},
	{"RemoveNetwork", func(ctx context.Context, r runtime.ContainerRuntime) error { return r.RemoveNetwork(ctx, "n1") }},
}

// Unreachable checks, for each endpoint, that the adapter open makes is
// created without contacting its backend and that then every verb fails
// within UnreachableLimit with runtime.ErrUnavailable, in a *runtime.Error
// of the adapter's name with an Op, whose message names the endpoint.
func Unreachable(t *testing.T, open Open, endpoints ...Endpoint) {
	for _, ep := range endpoints {
		t.Run(ep.Name, func(t *testing.T) {
			r := open(t, ep, ep.Addr(t))
			t.Cleanup(func() { _ = r.Close() })

			for _, v := range unreachableVerbs {
				t.Run(v.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					start := time.Now()
					err := v.call(ctx, r)
					elapsed := time.Since(start)

					require.Error(t, err)
					assert.ErrorIs(t, err, runtime.ErrUnavailable)
					assert.Contains(t, err.Error(), r.Endpoint(), "the message names the endpoint")
					assert.Less(t, elapsed, UnreachableLimit, "an unreachable endpoint fails fast")
					var re *runtime.Error
					require.True(t, errors.As(err, &re))
					assert.Equal(t, r.Name(), re.Runtime)
					assert.NotEmpty(t, re.Op)
				})
			}
		})
	}
}

// Fixed is an Endpoint.Addr that is always addr.
func Fixed(addr string) func(*testing.T) string {
	return func(*testing.T) string { return addr }
}

// RefusedTCP is testkit.RefusedTCP: "tcp://" and a loopback port on
// which nothing listens.
func RefusedTCP(t *testing.T) string { return testkit.RefusedTCP(t) }

// NotFound is testkit.NotFound: an HTTP server answering 404 to
// everything, on network "tcp" or "unix", as a URL.
func NotFound(t *testing.T, network string) string { return testkit.NotFound(t, network) }

// Hung is testkit.Hung: a listener that accepts and never answers, on
// network "tcp" or "unix", as a URL.
func Hung(t *testing.T, network string) string { return testkit.Hung(t, network) }

// tinyArchive is a well-formed docker-archive of one empty image, so that
// LoadImage gets as far as the backend.
func tinyArchive() []byte {
	var layer bytes.Buffer
	_ = tar.NewWriter(&layer).Close()
	files := [][2]string{
		{"config.json", `{"rootfs":{"type":"layers","diff_ids":[]}}`},
		{"layer.tar", layer.String()},
		{dockerarchive.ManifestName, `[{"Config":"config.json","RepoTags":["localhost/sandboxer-unreachable:1"],"Layers":["layer.tar"]}]`},
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, f := range files {
		_ = tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(f[1]))
	}
	_ = tw.Close()
	return out.Bytes()
}
