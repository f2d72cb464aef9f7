package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distribution/reference"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/roboco/sandboxer/internal/testkit"
	"github.com/roboco/sandboxer/internal/testruntimes"
	"github.com/roboco/sandboxer/provision"
)

// TestWarmTemplateKeyIsTheSameOnEveryRuntime: the README's claim that the
// same base image gives the same template key on every runtime with an
// image store. The postgres stand-in, pulled from one registry into
// Docker, Podman (rootful and rootless) and containerd, has on each the
// ID that is its config's digest as the registry serves it (so the ID
// names the image's content, not how a store keeps it), and every
// runtime derives the same template ref from it.
func TestWarmTemplateKeyIsTheSameOnEveryRuntime(t *testing.T) {
	var (
		mu   sync.Mutex
		refs = map[string]string{} // runtime -> template ref
	)
	testruntimes.ForEach(t, func(t *testing.T, b testruntimes.Runtime) {
		e := testruntimes.NewWorld(t, b)
		ctx := testkit.Context(t, 5*time.Minute)
		image := testkit.EnsureImage(t, b.RT, e.Images["postgres"])
		p := e.Provisioner(func(o *provision.Options) { o.Warm = provision.WarmAuto })
		tmpl, err := p.LookupTemplate(ctx, "postgres")
		require.NoError(t, err)
		require.NotEmpty(t, tmpl.Ref, "the base image %s is present: it has a template ref", image)
		assert.Equal(t, registryConfigDigest(t, ctx, image), tmpl.BaseID, "the runtime's image ID of %s is its config's digest", image)
		t.Logf("%s: base %s (ID %s): template %s", b.Name, image, tmpl.BaseID, tmpl.Ref)
		mu.Lock()
		refs[b.Name] = tmpl.Ref
		mu.Unlock()
	})
	require.GreaterOrEqual(t, len(refs), 2, "at least two runtimes to compare (%v)", refs)
	var first string
	for name, ref := range refs {
		if first == "" {
			first = name
			continue
		}
		assert.Equal(t, refs[first], ref, "the template ref on %s and on %s", first, name)
	}
}

// registryConfigDigest asks the registry that serves ref (the stand-ins'
// plain-HTTP registry on 127.0.0.1) for the image's manifest, and returns
// the digest of its config.
func registryConfigDigest(t *testing.T, ctx context.Context, ref string) string {
	t.Helper()
	named, err := reference.ParseNormalizedNamed(ref)
	require.NoError(t, err, "image ref %s", ref)
	tagged, ok := reference.TagNameOnly(named).(reference.Tagged)
	require.True(t, ok, "%s has a tag", ref)
	host, path := reference.Domain(named), reference.Path(named)
	require.True(t, strings.HasPrefix(host, "127.0.0.1:") || strings.HasPrefix(host, "localhost:"), "the stand-in %s is served by a local registry", ref)
	url := fmt.Sprintf("http://%s/v2/%s/manifests/%s", host, path, tagged.Tag())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", strings.Join([]string{
		"application/vnd.oci.image.manifest.v1+json",
		"application/vnd.docker.distribution.manifest.v2+json",
	}, ", "))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "GET %s", url)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "GET %s", url)
	var m struct {
		MediaType string `json:"mediaType"`
		Config    struct {
			Digest string `json:"digest"`
		} `json:"config"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&m), "the manifest of %s", ref)
	require.NotEmpty(t, m.Config.Digest, "%s: a single-platform manifest with a config (%s)", ref, m.MediaType)
	return m.Config.Digest
}
